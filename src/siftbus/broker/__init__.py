"""The distributed broker network: wire format, broker core, routing protocols, asyncio
server, overlay config, in-process simulator and instrumentation."""
