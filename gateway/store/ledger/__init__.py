"""The budget ledger: its table and statements, and the ledgers that keep it (a thread on
the store, a sole writer's memory, PostgreSQL's async pool, a fallback through outages)."""
