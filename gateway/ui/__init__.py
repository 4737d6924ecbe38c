"""The read side: JSON read API and server-rendered pages."""
