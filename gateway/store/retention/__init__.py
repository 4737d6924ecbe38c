"""Retention: the background purge and what goes with a trace (its rows, partitions, MCP rows)."""
