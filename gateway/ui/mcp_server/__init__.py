"""An MCP server over the recorded traces: read-only tools a coding agent calls to learn how
its runs went (`/api/mcp/traces` over Streamable HTTP, `loopwatch mcp-server` over stdio)."""
