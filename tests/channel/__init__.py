"""Tests of the channel layer (siftbus.channel): objects, filters, QoS, durability,
remote access, the CLI, and bad input."""
