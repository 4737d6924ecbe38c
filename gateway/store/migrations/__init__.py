"""Alembic schema revisions of the trace store, applied at start-up by `store/migrate.py`."""
