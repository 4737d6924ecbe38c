"""Wire protocol adapters, one module per protocol."""
