"""The read side of the store: queries, lists and their pages, search, sessions, MCP reads."""
