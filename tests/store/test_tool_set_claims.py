"""Retention's sweep of unused tool sets against a PostgreSQL writer whose batch re-uses one:
the list must be there once the batch's steps name it, whichever transaction comes first.
(SQLite has one writer at a time: the sweep and a batch never interleave.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.engine import create_schema, make_engine, write_connection
from gateway.store.models import ITEMS, STEPS, TOOL_SETS
from gateway.store.retention.traces import drop_unused_tool_sets, sweep_tool_sets
from gateway.store.write.tool_sets import store_tool_sets
from gateway.store.write.writer import StoreWriter
from tests.conftest import Database
from tests.factories import build_step

TOOLS = [{"type": "function", "function": {"name": "comes_back_after_a_month"}}]


@pytest.fixture
def pg_engine(postgres_database: Database) -> Iterator[Engine]:
    # A lock wait past 10 s fails the statement instead of hanging the test.
    engine = make_engine(postgres_database.engine_url(lock_timeout="10s"))
    create_schema(engine)
    yield engine
    engine.dispose()


def _unused_tool_set(engine: Engine) -> str:
    """A stored tool set no step names any more (its only step deleted), as retention
    finds one whose runs are gone."""
    StoreWriter(engine).write_batch([build_step("gone", declared_tools=TOOLS)])
    with engine.begin() as conn:
        conn.execute(ITEMS.delete())
        conn.execute(STEPS.delete())
        return str(conn.scalar(sa.select(TOOL_SETS.c.hash)))


def _stored(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.scalars(sa.select(TOOL_SETS.c.hash)))


def test_a_sweep_skips_a_tool_set_a_batch_being_written_claims(pg_engine: Engine) -> None:
    unused = _unused_tool_set(pg_engine)
    with write_connection(pg_engine) as writer, writer.begin():
        claimed = store_tool_sets(writer, [build_step("back", declared_tools=TOOLS)])
        assert list(claimed.values()) == [unused]
        sweep_tool_sets(pg_engine, [unused])  # another connection, while the batch is open
    assert _stored(pg_engine) == [unused]
    sweep_tool_sets(pg_engine, [unused])  # no batch claims it now, and no step names it
    assert _stored(pg_engine) == []


def test_a_batch_stores_again_a_tool_set_a_sweep_deleted_first(pg_engine: Engine) -> None:
    unused = _unused_tool_set(pg_engine)
    written: list[dict[str, str]] = []
    with write_connection(pg_engine) as sweep, sweep.begin():
        drop_unused_tool_sets(sweep, [unused])  # deleted, not yet committed

        def batch() -> None:
            with write_connection(pg_engine) as writer, writer.begin():
                written.append(store_tool_sets(writer, [build_step("back", declared_tools=TOOLS)]))

        writing = threading.Thread(target=batch)
        writing.start()
        writing.join(timeout=1.0)
        assert writing.is_alive()  # the batch waits for the sweep's transaction
    writing.join(timeout=15.0)
    assert written and list(written[0].values()) == [unused]
    assert _stored(pg_engine) == [unused]
