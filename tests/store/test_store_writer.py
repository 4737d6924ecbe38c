"""StoreWriter on SQLite and PostgreSQL: round trips, counters, replicas, retries, refusals."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from gateway.items import Item, ItemKind, StopReason, Usage, Violation, ViolationKind
from gateway.step import Lineage, RefusalRecord, StepRecord
from gateway.store.engine import create_schema
from gateway.store.models import ITEMS, STEPS, TOOL_SETS, VIOLATIONS
from gateway.store.read.queries import get_trace
from gateway.store.write.tool_sets import tool_set_hash
from gateway.store.write.writer import StoreWriter
from tests.conftest import OpenEngine

MakeStep = Callable[..., StepRecord]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def _count(engine: Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_round_trip_item_by_item(engine: Engine, make_step: MakeStep) -> None:
    reasoning = Item(ItemKind.REASONING, attrs={"tokens": 42})
    result = Item(
        ItemKind.TOOL_RESULT, role="tool", text="ünïcode ✓", call_id="call_x", is_error=True
    )
    step = make_step(
        "t-round",
        usage=Usage(10, 5, 15, 2, 3, 7),
        provider_request_id="req_1",
        response_id="resp_1",
        error={"type": "overloaded", "status": 529},
        continuation_key="k" * 64,
        retry_of="step-failed-attempt",
        violations=[Violation(ViolationKind.ORPHAN_TOOL_RESULT, "no call", call_id="call_x")],
        declared_tools=TOOLS,
        params={"model": "gpt-4o", "temperature": 0.2, "tool_choice": "auto"},
        attrs={"requested_model": "gpt-4o-mini", "server_tool_requests": {"web_search": 2}},
    )
    step = replace(
        step, input_items=(*step.input_items, result), output_items=(reasoning, *step.output_items)
    )
    StoreWriter(engine).write_batch([step])

    trace = get_trace(engine, "t-round")
    assert trace is not None
    (stored,) = trace["steps"]
    assert stored["input_items"] == [item.to_json() for item in step.input_items]
    assert stored["output_items"] == [item.to_json() for item in step.output_items]
    assert stored["usage"] == step.usage.to_json()  # cache writes included
    scalars = {k: v for k, v in stored.items() if k not in ("input_items", "output_items", "usage")}
    assert scalars == {
        "id": step.id,
        "seq": 1,
        "protocol": "chat",
        "method": step.method,
        "path": step.path,
        "model": "gpt-4o",
        "stream": True,
        "http_status": 200,
        "stop_reason": "tool_calls",
        "raw_stop_reason": "tool_calls",
        "provider_request_id": "req_1",
        "response_id": "resp_1",
        "started_at": step.started_at.isoformat().replace("+00:00", ".000000Z"),
        "latency_ms": 120.5,
        "ttft_ms": 40.0,
        "error": {"type": "overloaded", "status": 529},
        "tool_ms": None,
        "cost_usd": None,
        "cost_source": None,
        "retry_of": "step-failed-attempt",
        "params": {"model": "gpt-4o", "temperature": 0.2, "tool_choice": "auto"},
        "tool_set": tool_set_hash(TOOLS),
        "tools": TOOLS,
        "attrs": {"requested_model": "gpt-4o-mini", "server_tool_requests": {"web_search": 2}},
    }
    (violation,) = trace["violations"]
    assert violation["kind"] == "orphan_tool_result"
    assert violation["step_id"] == step.id
    assert violation["call_id"] == "call_x"
    assert violation["enforced"] is False
    assert trace["violation_count"] == 1
    assert trace["status"] == "abandoned"  # long idle with its tool call unanswered
    assert trace["budget"] == {"max_steps": None, "max_tokens": None}


def test_seq_counters_and_models(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    first = make_step("t", model="gpt-4o", budget_max_steps=10)
    writer.write_batch([first, make_step("t", model="o3"), make_step("other")])
    last = make_step(
        "t",
        model="gpt-4o",
        usage=Usage(prompt_tokens=7, completion_tokens=3),  # no total: prompt + completion
        budget_max_tokens=5000,
    )
    writer.write_batch([last])

    trace = get_trace(engine, "t")
    assert trace is not None
    assert [s["seq"] for s in trace["steps"]] == [1, 2, 3]
    assert trace["steps"][0]["id"] == first.id
    assert trace["step_count"] == 3
    assert trace["models"] == ["gpt-4o", "o3"]
    assert trace["usage"] == {
        "prompt_tokens": 27,
        "completion_tokens": 13,
        "total_tokens": 40,
        "cached_tokens": 4,
        "reasoning_tokens": 0,
    }
    assert trace["budget"] == {"max_steps": 10, "max_tokens": 5000}
    assert trace["started_at"] == first.started_at.isoformat().replace("+00:00", ".000000Z")
    end = last.started_at + timedelta(milliseconds=last.latency_ms or 0)
    assert trace["updated_at"] == end.isoformat().replace("+00:00", "Z")


def test_status_follows_the_last_step_and_refusal(engine: Engine, make_step: MakeStep) -> None:
    writer = StoreWriter(engine)
    writer.write_batch([make_step("t", stop_reason=StopReason.INTERRUPTED)])
    assert _status(engine) == "failed"
    writer.write_batch([make_step("t", stop_reason=StopReason.COMPLETED, output_items=[])])
    assert _status(engine) == "completed"
    refusal = RefusalRecord(
        trace_id="t",
        created_at=make_step().started_at,
        violations=[Violation(ViolationKind.STEP_BUDGET_EXCEEDED, "3 of 2 steps", enforced=True)],
        budget_exceeded=True,
        budget_max_steps=2,
    )
    writer.write_batch([refusal])
    assert _status(engine) == "budget_exceeded"
    # A later request admitted (a raised budget): its step decides again.
    writer.write_batch([make_step("t", stop_reason=StopReason.ERROR)])
    trace = get_trace(engine, "t")
    assert trace is not None
    assert trace["status"] == "failed"
    assert trace["step_count"] == 3
    assert trace["violation_count"] == 1
    assert trace["budget"]["max_steps"] == 2
    assert trace["violations"][0]["step_id"] is None
    assert trace["violations"][0]["enforced"] is True


def _status(engine: Engine) -> str:
    trace = get_trace(engine, "t")
    assert trace is not None
    return str(trace["status"])


def test_refusal_alone_creates_the_trace(engine: Engine, make_step: MakeStep) -> None:
    refusal = RefusalRecord(
        trace_id="refused",
        created_at=make_step().started_at,
        violations=[
            Violation(ViolationKind.TOKEN_BUDGET_EXCEEDED, "over", enforced=True),
            Violation(ViolationKind.MISSING_TOOL_RESULT, "none", call_id="c1", enforced=True),
        ],
        budget_exceeded=True,
        budget_max_tokens=100,
    )
    StoreWriter(engine).write_batch([refusal])
    trace = get_trace(engine, "refused")
    assert trace is not None
    assert trace["status"] == "budget_exceeded"
    assert trace["step_count"] == 0
    assert trace["steps"] == []
    assert trace["violation_count"] == 2
    assert {v["kind"] for v in trace["violations"]} == {
        "token_budget_exceeded",
        "missing_tool_result",
    }


def test_pairing_refusal_after_the_last_step_is_refused(
    engine: Engine, make_step: MakeStep
) -> None:
    writer = StoreWriter(engine)
    writer.write_batch([make_step("t")])
    refusal = RefusalRecord(
        trace_id="t",
        created_at=make_step().started_at,
        violations=[Violation(ViolationKind.ORPHAN_TOOL_RESULT, "x", call_id="c", enforced=True)],
    )
    writer.write_batch([refusal])
    assert _status(engine) == "refused"


def test_retry_of_a_committed_batch_writes_nothing_twice(
    engine: Engine, make_step: MakeStep
) -> None:
    writer = StoreWriter(engine)
    refusal = RefusalRecord(
        trace_id="t",
        created_at=make_step().started_at,
        violations=[Violation(ViolationKind.STEP_BUDGET_EXCEEDED, "x", enforced=True)],
        budget_exceeded=True,
    )
    batch: list[StepRecord | RefusalRecord] = [
        make_step("t", violations=[Violation(ViolationKind.TRUNCATED_TOOL_CALL, "cut")]),
        make_step("t"),
        refusal,
    ]
    writer.write_batch(batch)
    writer.write_batch(batch)  # e.g. the commit succeeded but its answer was lost
    writer.write_batch([*batch, make_step("t")])
    trace = get_trace(engine, "t")
    assert trace is not None
    assert trace["step_count"] == 3
    assert [s["seq"] for s in trace["steps"]] == [1, 2, 3]
    assert trace["violation_count"] == 2
    assert _count(engine, VIOLATIONS) == 2
    assert _count(engine, ITEMS) == 3 * 4
    assert trace["usage"]["total_tokens"] == 45


def test_failed_batch_leaves_nothing_and_retries_cleanly(
    engine: Engine, make_step: MakeStep
) -> None:
    writer = StoreWriter(engine)
    good = make_step("t")
    bad = make_step("t")
    poison = Item(ItemKind.OTHER, attrs={"not_json": {1, 2}})
    poisoned = replace(bad, output_items=(*bad.output_items, poison))
    with pytest.raises((sa_exc.StatementError, TypeError)):  # psycopg raises it unwrapped
        writer.write_batch([good, poisoned])
    assert _count(engine, STEPS) == 0  # one transaction: the good step rolled back too
    assert get_trace(engine, "t") is None
    writer.write_batch([good, bad])
    trace = get_trace(engine, "t")
    assert trace is not None
    assert trace["step_count"] == 2


def test_two_replicas_writing_concurrently_stay_exact(
    database_url: str, open_engine: OpenEngine, make_step: MakeStep
) -> None:
    engines = [open_engine(database_url), open_engine(database_url)]
    create_schema(engines[0])
    traces = ["a", "b", "c"]
    batches, per_batch, threads_per_engine = 15, 4, 3
    errors: list[BaseException] = []

    def replica(engine: Engine, worker: int) -> None:
        writer = StoreWriter(engine)
        try:
            for n in range(batches):
                # Every batch touches several traces, in an order that differs per worker.
                records = [
                    make_step(traces[(worker + n + k) % len(traces)], items=3)
                    for k in range(per_batch)
                ]
                writer.write_batch(records)
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=replica, args=(engine, index * threads_per_engine + t))
        for index, engine in enumerate(engines)
        for t in range(threads_per_engine)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    total = len(workers) * batches * per_batch
    counted = 0
    for trace_id in traces:
        trace = get_trace(engines[1], trace_id)
        assert trace is not None
        steps = trace["steps"]
        assert [s["seq"] for s in steps] == list(range(1, len(steps) + 1))
        assert trace["step_count"] == len(steps)
        assert trace["usage"]["total_tokens"] == 15 * len(steps)
        counted += len(steps)
    assert counted == total
    assert _count(engines[0], ITEMS) == total * 5


def test_batch_of_many_items_is_one_statement(engine: Engine, make_step: MakeStep) -> None:
    """SQLite: one executemany; PostgreSQL: one COPY stream, no INSERT at all."""
    statements: list[Any] = []

    def spy(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ITEMS ("):  # not items_fts
            statements.append(many)

    sa.event.listen(engine, "before_cursor_execute", spy)
    try:
        StoreWriter(engine).write_batch([make_step("t", items=50) for _ in range(5)])
    finally:
        sa.event.remove(engine, "before_cursor_execute", spy)
    assert statements == ([True] if engine.dialect.name == "sqlite" else [])
    assert _count(engine, ITEMS) == 5 * 52


def test_declared_tools_are_stored_once_across_steps_and_batches(
    engine: Engine, make_step: MakeStep
) -> None:
    """A run re-sends its tools every step: one row per distinct list, whatever the batch."""
    other = [{"name": "search", "description": "Search the web.", "input_schema": {}}]
    first = [make_step("t-tools-a", declared_tools=TOOLS) for _ in range(3)]
    StoreWriter(engine).write_batch(first)
    later = [make_step("t-tools-a", declared_tools=list(TOOLS)), make_step("t-tools-b")]
    later.append(make_step("t-tools-b", declared_tools=other))
    StoreWriter(engine).write_batch(later)
    assert _count(engine, TOOL_SETS) == 2
    assert _count(engine, STEPS) == 6
    trace = get_trace(engine, "t-tools-a")
    assert trace is not None
    assert [step["tools"] for step in trace["steps"]] == [TOOLS] * 4
    other_trace = get_trace(engine, "t-tools-b")
    assert other_trace is not None
    assert [step["tools"] for step in other_trace["steps"]] == [None, other]


def test_a_trace_takes_its_place_in_its_tree_from_its_first_step(
    engine: Engine, make_step: MakeStep
) -> None:
    writer = StoreWriter(engine)
    child = Lineage("t-root", 1, "t-root", "call_1", "content")
    writer.write_batch([make_step("t-root"), make_step("t-child", step_id="s-c1", lineage=child)])
    # A later step's lineage changes nothing: the link is made once.
    other = Lineage("t-else", 3, "t-else", "call_9", "header")
    writer.write_batch([make_step("t-child", step_id="s-c2", lineage=other)])
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, parent_trace_id, parent_call_id, root_trace_id, depth FROM traces "
                "ORDER BY id"
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        ("t-child", "t-root", "call_1", "t-root", 1),
        ("t-root", None, None, "t-root", 0),
    ]


def test_a_running_sub_agent_keeps_its_parent_and_root_active(
    engine: Engine, make_step: MakeStep
) -> None:
    writer = StoreWriter(engine)
    start = make_step("t-top").started_at
    writer.write_batch([make_step("t-top", at=start)])  # its call open, waiting
    mid = Lineage("t-top", 1, "t-top", "call_1", "header")
    writer.write_batch([make_step("t-mid", at=start + timedelta(seconds=10), lineage=mid)])
    leaf = Lineage("t-top", 2, "t-mid", "call_2", "header")
    writer.write_batch([make_step("t-leaf", at=start + timedelta(seconds=250), lineage=leaf)])
    later = start + timedelta(seconds=400)  # the top's own step is 400 s old
    statuses = {
        trace_id: (get_trace(engine, trace_id, now=later, idle_seconds=300) or {})["status"]
        for trace_id in ("t-top", "t-mid", "t-leaf")
    }
    assert statuses == {"t-top": "running", "t-mid": "running", "t-leaf": "running"}
    much_later = start + timedelta(seconds=900)
    assert (get_trace(engine, "t-top", now=much_later, idle_seconds=300) or {})["status"] == (
        "abandoned"
    )
