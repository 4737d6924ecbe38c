"""Which trace a request continues: keys, their caches, sessions (sans-IO)."""
