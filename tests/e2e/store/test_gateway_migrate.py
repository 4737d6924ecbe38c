"""A gateway started on a database made before migrations adopts it: every trace listed,
searched and shown as before, and new steps recorded into the migrated schema."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from gateway.store.migrate import METADATA, current_revision, head
from tests import harness
from tests.conftest import Database, OpenEngine
from tests.fakes.chat import completion
from tests.harness import GatewayFactory
from tests.store.test_store_migrate import (
    _as_text,
    _columns,
    _rows,
    load_database_before_migrations,
)
from tests.traffic import HELLO, post

provider, make_gateway = harness.provider, harness.make_gateway


async def test_start_up_adopts_a_database_made_before_migrations(
    database: Database, tmp_path: Path, make_gateway: GatewayFactory, open_engine: OpenEngine
) -> None:
    url = load_database_before_migrations(database, tmp_path)
    old = open_engine(url)
    traces = {row.id: row.step_count for row in _rows(old, "traces")}
    columns_before = {t: _columns(old, t) for t in METADATA.tables if sa.inspect(old).has_table(t)}
    rows_before = {t: _as_text(old, t, columns) for t, columns in columns_before.items()}
    statuses_before = {row.id: row.status for row in _rows(old, "traces")}
    with old.connect() as conn:
        assert current_revision(conn) is None
    assert len(traces) == 6

    gw = await make_gateway(database_url=url)
    listed = await gw.traces(limit="50")
    assert {t["id"]: t["step_count"] for t in listed} == traces
    renamed = {"ok": "completed", "error": "failed"}
    shown = {i: renamed.get(s, s) for i, s in statuses_before.items()}
    assert {t["id"]: t["status"] for t in listed} == shown  # final: never `running`
    assert all(t["cost_usd"] is None for t in listed if t["step_count"])  # unknown, not 0
    completed = {i for i, s in shown.items() if s == "completed"}
    assert {t["id"] for t in await gw.traces(status="completed", limit="50")} == completed
    some = next(iter(traces))
    assert [t["id"] for t in await gw.traces(q=some[:-2], limit="50")] == [some]
    for trace_id, steps in traces.items():
        assert len((await gw.trace(trace_id))["steps"]) == steps
    gw.provider.queue(completion("hello again"))
    assert await post(gw, HELLO) == 200  # and it records into the adopted schema
    assert len(await gw.traces(limit="50")) == 7

    with old.connect() as conn:
        assert current_revision(conn) == head()
    for table, rows in rows_before.items():
        after = _as_text(old, table, columns_before[table])
        assert rows <= after, f"{table} lost or changed rows"
    statuses = {row.id: row.status for row in _rows(old, "traces")}
    assert {i: statuses[i] for i in statuses_before} == {
        i: renamed.get(s, s) for i, s in statuses_before.items()
    }
