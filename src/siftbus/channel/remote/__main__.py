"""``python -m siftbus.channel.remote``: the standalone channel server (see
:func:`siftbus.channel.remote.server.main`)."""

from siftbus.channel.remote.server import main

main()
