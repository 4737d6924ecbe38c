"""A store at an older revision, and today's writer on it, for upgrade tests: the columns
later revisions added are left out of its rows, as the writer of that time wrote them."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection, Engine

from gateway.store.engine import make_engine
from gateway.store.migrate import alembic_config
from gateway.store.write import trace_merge
from gateway.store.write import writer as writer_module
from gateway.store.write.rows import insert_many


def store_at(url: str, revision: str) -> Engine:
    """An engine on a new store whose schema stops at `revision`."""
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)
    return engine


def write_as_at_its_revision(monkeypatch: pytest.MonkeyPatch, engine: Engine) -> None:
    """Until `monkeypatch` is undone, the writer's rows keep only the columns `engine`'s
    steps, items and traces have, and take no key epoch (revision 0013) when they have none."""
    inspector = sa.inspect(engine)
    stored = {t: {c["name"] for c in inspector.get_columns(t)} for t in ("steps", "items")}

    def older_rows(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        known = stored.get(table.name)
        kept = rows if known is None else [{k: v for k, v in r.items() if k in known} for r in rows]
        insert_many(conn, table, kept)

    monkeypatch.setattr(writer_module, "insert_many", older_rows)
    if "key_epoch" not in stored["steps"]:
        monkeypatch.setattr(writer_module, "epoch_for_batch", lambda conn: 0)
    traces = {c["name"] for c in inspector.get_columns("traces")}
    if not set(trace_merge._NEW) <= traces:  # a new trace's row: only the columns it has
        monkeypatch.setattr(trace_merge, "_NEW", tuple(c for c in trace_merge._NEW if c in traces))
        uncached = trace_merge._pg_batch_rows.__wrapped__  # its statement names the columns
        monkeypatch.setattr(trace_merge, "_pg_batch_rows", uncached)
