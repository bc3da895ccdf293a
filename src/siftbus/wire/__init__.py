"""The wire layer: frames and codecs (no I/O) and the asyncio frame transport.

``frames`` defines the frame header, message types and bodies (and the one decoder of
ERROR replies); ``events`` and ``profiles`` the payloads they carry; ``limits`` what one
peer may send. ``transport`` (connections, :func:`~siftbus.wire.transport.connect`) and
``listener`` (accepting) read and write frames for every server and client of siftbus
(``counters`` counts what they did); ``signals`` stops a server process on SIGTERM/SIGINT.
"""
