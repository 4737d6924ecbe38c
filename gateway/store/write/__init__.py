"""The write side of the store: batched writes of records, their rows and summaries."""
