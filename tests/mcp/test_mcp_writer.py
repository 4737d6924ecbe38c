"""The MCP writer on both databases: redacted rows, upserts by id, and a record the database
refuses (a NUL character PostgreSQL will not store in text) never takes others with it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.engine import Engine

from gateway.config import RedactionSettings
from gateway.mcp.records import Execution
from gateway.redaction.redactor import Redactor
from gateway.store import mcp_reads as reads
from gateway.store.mcp_writer import McpWriter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def execution(id_: str, tool: str = "read", **fields: object) -> Execution:
    values: dict[str, object] = {"arguments": {"path": "/a"}, **fields}
    return Execution(id=id_, server="fs", tool=tool, started_at=T0, **values)  # type: ignore[arg-type]


def test_rows_are_upserted_and_a_bad_record_is_dropped_alone(engine: Engine) -> None:
    writer = McpWriter(engine, Redactor(RedactionSettings()))
    writer.start()
    try:
        writer.submit(
            [
                execution("ex-1", trace_id="tr-1", arguments={"password": "pw-1234567"}),
                execution("ex-2", tool="bad\x00name", trace_id="tr-1"),
                execution("ex-3", trace_id="tr-1"),
            ]
        )
        writer.submit([execution("ex-3", trace_id="tr-1", outcome="ok", delivery="delivered")])
        assert writer.flush()
    finally:
        writer.close()
    stored = {e["id"]: e for e in reads.trace_executions(engine, "tr-1")}
    assert {"ex-1", "ex-3"} <= set(stored)
    assert stored["ex-1"]["arguments"] == {"password": "[REDACTED:password]"}
    assert (stored["ex-3"]["outcome"], stored["ex-3"]["delivery"]) == ("ok", "delivered")
