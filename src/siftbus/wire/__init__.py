"""The wire layer: frames and codecs (no I/O) and the asyncio frame transport.

``frames`` defines the frame header, message types and bodies; ``events`` and
``profiles`` the payloads they carry; ``transport`` reads and writes frames on asyncio
streams for every server and client of siftbus.
"""
