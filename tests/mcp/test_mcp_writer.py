"""MCP records through the recorder on both databases: redacted rows, upserts by id, a record
the database refuses (a NUL character PostgreSQL will not store in text) never takes others
with it, a replayed batch is stored once, and a violation counts on its run once it joins."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.config import Settings
from gateway.mcp.records import Execution, McpViolation, MethodCall, ToolList
from gateway.recording import codec
from gateway.recording.process import StoreWriters, make_recorder
from gateway.store.mcp_tables import MCP_METHODS
from gateway.store.models import TRACES
from gateway.store.read import mcp as reads

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def execution(id_: str, tool: str = "read", **fields: object) -> Execution:
    values: dict[str, object] = {"arguments": {"path": "/a"}, **fields}
    return Execution(id=id_, server="fs", tool=tool, started_at=T0, **values)  # type: ignore[arg-type]


async def _recorded(engine: Engine, *batches: list[object]) -> None:
    recorder = make_recorder(Settings(), engine)
    recorder.start(Background())
    try:
        for batch in batches:
            for record in batch:
                recorder.submit(record)  # type: ignore[arg-type]
            await recorder.flush(10)
    finally:
        await recorder.close()


async def test_rows_are_redacted_upserted_and_a_bad_record_is_dropped_alone(
    engine: Engine,
) -> None:
    await _recorded(
        engine,
        [
            execution("ex-1", trace_id="tr-1", arguments={"password": "pw-1234567"}),
            execution("ex-2", tool="bad\x00name", trace_id="tr-1"),
            execution("ex-3", trace_id="tr-1"),
        ],
        [execution("ex-3", trace_id="tr-1", outcome="ok", delivery="delivered")],
    )
    stored = {e["id"]: e for e in reads.trace_executions(engine, "tr-1")}
    assert {"ex-1", "ex-3"} <= set(stored)
    assert stored["ex-1"]["arguments"] == {"password": "[REDACTED:password]"}
    assert (stored["ex-3"]["outcome"], stored["ex-3"]["delivery"]) == ("ok", "delivered")


def test_every_mcp_record_survives_the_spool_line() -> None:
    records = [
        execution("ex-1", trace_id="tr-1", result={"content": [{"type": "text", "text": "é"}]}),
        execution("ex-2", arguments={"text": "half a pair: \ud800"}),  # as a client may send
        MethodCall("fs", "ping", T0, 1.5, "ok", "tr-1", "2025-11-25"),
        ToolList("fs", [{"name": "read", "inputSchema": {"type": "object"}}], T0),
        McpViolation("mv-1", "undeclared_tool", "detail", T0, "fs", execution_id="ex-1"),
    ]
    for record in records:
        line = codec.encode(record)  # type: ignore[arg-type]
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert codec.decode(line) == record


def _violation_count(engine: Engine, trace_id: str) -> int:
    with engine.connect() as conn:
        query = sa.select(TRACES.c.violation_count).where(TRACES.c.id == trace_id)
        return int(conn.execute(query).scalar_one())


def test_a_violation_counts_on_its_run_once_joined_and_a_replay_changes_nothing(
    engine: Engine,
) -> None:
    writers = StoreWriters(engine)
    unjoined = execution("ex-9", outcome="ok")
    violation = McpViolation("mv-9", "undeclared_tool", "d", T0, "fs", execution_id="ex-9")
    method = MethodCall("fs", "tools/list", T0, 2.0, "ok")
    writers.write_batch([unjoined, violation, method])
    joined = replace(unjoined, trace_id="tr-9", call_id="call_9", join="content")
    batch = [joined, replace(violation, trace_id="tr-9", call_id="call_9")]
    writers.write_batch(batch)
    assert _violation_count(engine, "tr-9") == 1
    for _ in range(2):  # a spool replayed after a crash hands the same records again
        writers.write_batch([unjoined, violation, method, *batch])
    assert _violation_count(engine, "tr-9") == 1
    [stored] = reads.trace_violations(engine, "tr-9")
    assert stored["call_id"] == "call_9"
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(MCP_METHODS)).scalar() == 1
