"""The MCP side of the proxy: relay, OAuth, the stdio bridge's ingest, the runtime, store joins."""
