"""PostgreSQL's opt-in time partitions: which exist, converting a store, keeping them ahead."""
