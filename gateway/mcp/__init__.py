"""The MCP side of the loop: tool servers proxied at /mcp/{name}, their calls recorded,
joined to the model's tool calls and checked (sans-IO reading here, I/O beside it)."""
