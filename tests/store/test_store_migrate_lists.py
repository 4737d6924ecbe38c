"""The revision that makes lists seek carries a populated store over: each trace's models,
its sessions summed up and the duration sort's key come from the rows already there."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection, Engine

from gateway.store.engine import create_schema, make_engine
from gateway.store.migrate import alembic_config
from gateway.store.read.queries import list_traces
from gateway.store.read.sessions import sessions_page
from tests.conftest import Database

BEFORE = "0005"  # the newest revision before it
T0 = datetime(2026, 3, 1, 9, 0)  # naive UTC, as the tables store it
TOKENS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens")


def _trace(trace_id: str, start: float, end: float, **fields: Any) -> dict[str, Any]:
    """A trace row as revision 0005 stores it; times in seconds after T0."""
    row: dict[str, Any] = {
        "id": trace_id,
        "started_at": T0 + timedelta(seconds=start),
        "updated_at": T0 + timedelta(seconds=end),
        "status": "completed",
        "status_final": True,
        "step_count": 0,
        "models": [],
        "violation_count": 0,
        "cost_nano": 0,
        "session_id": None,
        "last_response_end": None,
        **dict.fromkeys(TOKENS, 0),
    }
    return row | fields


def _step(trace_id: str, seq: int, model: str | None) -> dict[str, Any]:
    return {
        "id": f"{trace_id}-{seq}",
        "trace_id": trace_id,
        "seq": seq,
        "protocol": "chat",
        "method": "POST",
        "path": "/v1/chat/completions",
        "model": model,
        "stream": False,
        "stop_reason": "completed",
        "started_at": T0 + timedelta(seconds=seq),
    }


def _populate(conn: Connection) -> None:
    tables = sa.MetaData()
    traces = sa.Table("traces", tables, autoload_with=conn)
    steps = sa.Table("steps", tables, autoload_with=conn)
    end = T0 + timedelta(seconds=90, milliseconds=250)
    conn.execute(
        traces.insert(),
        [
            _trace("short", 0, 10, step_count=2, models=["gpt-4o"], session_id="s1",
                   total_tokens=30, cost_nano=5, last_response_end=T0 + timedelta(seconds=10)),
            _trace("long", 5, 95, step_count=3, models=["gpt-4o", "claude-sonnet-4"],
                   session_id="s1", total_tokens=45, violation_count=1, last_response_end=end),
            _trace("other", 20, 30, step_count=1, models=["o3"], session_id="s2",
                   total_tokens=15, cost_nano=9, last_response_end=T0 + timedelta(seconds=29)),
            _trace("refused", 40, 40, violation_count=1),  # no step, no response end
        ],
    )  # fmt: skip
    conn.execute(
        steps.insert(),
        [
            _step("short", 1, "gpt-4o"),
            _step("short", 2, "gpt-4o"),
            _step("long", 1, "gpt-4o"),
            _step("long", 2, "claude-sonnet-4"),
            _step("long", 3, None),
            _step("other", 1, "o3"),
        ],
    )


def _at_revision(database: Database, revision: str) -> Engine:
    engine = make_engine(database.url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)
    return engine


def test_an_upgrade_carries_a_populated_store_over(database: Database) -> None:
    engine = _at_revision(database, BEFORE)
    with engine.begin() as conn:
        _populate(conn)
    create_schema(engine)  # start-up: every revision after it

    with engine.connect() as conn:
        pairs = set(conn.execute(sa.text("SELECT trace_id, model FROM trace_models")).all())
        spans = dict(conn.execute(sa.text("SELECT id, span_ms FROM traces")).all())
    assert pairs == {
        ("short", "gpt-4o"),
        ("long", "gpt-4o"),
        ("long", "claude-sonnet-4"),
        ("other", "o3"),
    }
    assert spans == {"short": 10_000, "long": 85_250, "other": 9_000, "refused": 0}
    ids = [t["id"] for t in list_traces(engine, sort="duration")["traces"]]
    assert ids == ["long", "short", "other", "refused"]
    assert [t["id"] for t in list_traces(engine, model="SONNET")["traces"]] == ["long"]
    sessions = sessions_page(engine)["sessions"]
    assert [(s["session_id"], s["trace_count"]) for s in sessions] == [("s1", 2), ("s2", 1)]
    s1 = sessions[0]
    assert s1["started_at"] == "2026-03-01T09:00:00.000000Z"
    assert s1["last_activity"] == "2026-03-01T09:01:35.000000Z"
    assert s1["cost_usd"] == 5e-9
    engine.dispose()
