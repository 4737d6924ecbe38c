"""The trace store: tables, engine, batched writer, read queries."""
