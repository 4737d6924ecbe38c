"""Server-rendered pages: routes, the lists, a trace and its steps, the MCP page, rendering."""
