"""The read API's trace filters and sessions over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest

from gateway.items import Item, ItemKind, StopReason, Violation, ViolationKind
from gateway.store.engine import create_schema
from gateway.store.write.writer import StoreWriter
from tests.conftest import Database, OpenEngine
from tests.factories import build_step
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

ANSWER = [Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="done")]


@pytest.fixture
async def seeded(
    database: Database, make_gateway: GatewayFactory, open_engine: OpenEngine
) -> Gateway:
    """Four traces: two of session s1 (one running now), one failed of s2, one old."""
    now = datetime.now(UTC)
    engine = open_engine(database.url)
    create_schema(engine)
    dup = Violation(ViolationKind.DUPLICATE_CALL_ID, "twice", call_id="c")
    StoreWriter(engine).write_batch(
        [
            build_step("live", at=now - timedelta(seconds=5), session_id="s1", model="gpt-4o"),
            build_step(
                "done",
                at=now - timedelta(hours=1),
                session_id="s1",
                model="claude-sonnet-4",
                stop_reason=StopReason.COMPLETED,
                output_items=ANSWER,
                cost_nano=2_000,
            ),
            build_step(
                "broke",
                at=now - timedelta(hours=2),
                session_id="s2",
                stop_reason=StopReason.ERROR,
                output_items=[],
                violations=[dup],
            ),
            build_step("old", at=datetime(2024, 1, 1, tzinfo=UTC)),
        ]
    )
    engine.dispose()
    return await make_gateway()


async def _get(gw: Gateway, path: str, **params: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(gw.url + path, params=params) as r:
        return r.status, await r.json()


async def _ids(gw: Gateway, **params: str) -> list[str]:
    return [t["id"] for t in await gw.traces(**params)]


async def test_filters(seeded: Gateway) -> None:
    gw = seeded
    assert await _ids(gw) == ["live", "done", "broke", "old"]
    assert await _ids(gw, status="running") == ["live"]
    assert await _ids(gw, status="completed") == ["done"]
    assert await _ids(gw, status="failed") == ["broke"]
    assert await _ids(gw, status="abandoned") == ["old"]  # its tool call never answered
    assert await _ids(gw, has_violations="true") == ["broke"]
    assert await _ids(gw, has_violations="false") == ["live", "done", "old"]
    assert await _ids(gw, model="SONNET") == ["done"]
    assert await _ids(gw, session="s1") == ["live", "done"]
    assert await _ids(gw, since="2025-01-01T00:00:00Z") == ["live", "done", "broke"]
    # An unescaped `+` of an offset arrives as a space; it is read as the `+` it was.
    assert await _ids(gw, until="2024-06-01T00:00:00 00:00") == ["old"]
    assert await _ids(gw, q="live") == ["live"]
    assert await _ids(gw, q="live", status="failed") == []
    done = (await gw.trace("done"))["cost_usd"]
    assert done == pytest.approx(2e-6)


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("status", "ok"),
        ("has_violations", "yes"),
        ("since", "yesterday"),
        ("until", "2025-13-01T00:00:00Z"),
        ("limit", "0"),
        ("cursor", "not a cursor!"),
    ],
)
async def test_a_bad_parameter_is_named(seeded: Gateway, param: str, value: str) -> None:
    status, body = await _get(seeded, "/api/traces", **{param: value})
    assert status == 400
    assert param in body["error"]["message"] or body["error"].get("param") == param


async def test_sessions(seeded: Gateway) -> None:
    status, body = await _get(seeded, "/api/sessions")
    assert status == 200
    sessions = {s["session_id"]: s for s in body["sessions"]}
    assert [s["session_id"] for s in body["sessions"]] == ["s1", "s2"]
    assert sessions["s1"]["trace_count"] == 2
    assert sessions["s1"]["cost_usd"] == pytest.approx(2e-6)
    assert body["next_cursor"] is None
    status, page = await _get(seeded, "/api/sessions", limit="1")
    assert [s["session_id"] for s in page["sessions"]] == ["s1"]
    status, rest = await _get(seeded, "/api/sessions", limit="1", cursor=page["next_cursor"])
    assert [s["session_id"] for s in rest["sessions"]] == ["s2"] and rest["next_cursor"] is None


async def test_a_search_past_its_time_limit_answers_503(
    database: Database, make_gateway: GatewayFactory, open_engine: OpenEngine
) -> None:
    engine = open_engine(database.url)
    create_schema(engine)
    hello = [Item(ItemKind.USER, role="user", text="hello there, world")]
    steps = [build_step(f"t{n}", input_items=hello, items=0) for n in range(60)]
    StoreWriter(engine).write_batch(steps)
    blocker = None
    if database.dialect == "sqlite":  # past the deadline at the first look at the clock
        gw = await make_gateway(search_timeout_s=1e-9)
    else:  # a lock keeps the search waiting until PostgreSQL's statement timeout ends it
        gw = await make_gateway(search_timeout_s=0.05)
        blocker = database.raw_connect()
        blocker.execute("BEGIN")
        blocker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
    try:
        status, body = await _get(gw, "/api/traces", q="hello")
    finally:
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert status == 503
    assert body["error"]["code"] == "search_timeout"
    assert body["error"]["param"] == "q"
    assert "stopped" in body["error"]["message"]
    assert len(await _ids(gw, limit="100")) == 60  # lists without q are not limited
    if blocker is None:  # the list page says so too
        async with aiohttp.ClientSession() as session, session.get(gw.url + "/?q=hello") as page:
            assert page.status == 503
            assert "took too long" in await page.text()


async def test_a_long_trace_comes_in_pages_of_steps(
    database: Database, make_gateway: GatewayFactory, open_engine: OpenEngine
) -> None:
    engine = open_engine(database.url)
    create_schema(engine)
    dup = Violation(ViolationKind.DUPLICATE_CALL_ID, "twice", call_id="c")
    steps = [build_step("long", items=1, violations=[dup] if n == 0 else []) for n in range(230)]
    StoreWriter(engine).write_batch(steps)
    StoreWriter(engine).write_batch([build_step("short")])
    gw = await make_gateway()

    status, first = await _get(gw, "/api/traces/long")  # as before, for runs up to 100 steps
    assert status == 200 and first["step_count"] == 230
    assert [s["seq"] for s in first["steps"]] == list(range(1, 101))
    assert first["next_steps_after"] == 100
    assert first["steps"][0]["input_items"][0]["text"].startswith("question")
    assert [v["kind"] for v in first["violations"]] == ["duplicate_call_id"]
    _, second = await _get(gw, "/api/traces/long", steps_after="100", steps_limit="120")
    assert [s["seq"] for s in second["steps"]] == list(range(101, 221))
    assert second["next_steps_after"] == 220 and second["violations"] == first["violations"]
    _, last = await _get(gw, "/api/traces/long", steps_after="220")
    assert [s["seq"] for s in last["steps"]] == list(range(221, 231))
    assert last["next_steps_after"] is None
    assert all(len(s["output_items"]) == 2 for s in last["steps"])
    _, whole = await _get(gw, "/api/traces/long", steps_limit="500")
    assert len(whole["steps"]) == 230 and whole["next_steps_after"] is None
    _, short = await _get(gw, "/api/traces/short")
    assert len(short["steps"]) == 1 and short["next_steps_after"] is None
    assert len((await gw.trace("long"))["steps"]) == 230  # the harness follows the pages


@pytest.mark.parametrize(
    ("param", "value"), [("steps_limit", "0"), ("steps_limit", "501"), ("steps_after", "-1")]
)
async def test_a_bad_step_page_is_named(seeded: Gateway, param: str, value: str) -> None:
    status, body = await _get(seeded, "/api/traces/live", **{param: value})
    assert status == 400
    assert body["error"].get("param") == param or param in body["error"]["message"]


async def test_violations_of_one_run(
    database: Database, make_gateway: GatewayFactory, open_engine: OpenEngine
) -> None:
    engine = open_engine(database.url)
    create_schema(engine)
    dup = Violation(ViolationKind.DUPLICATE_CALL_ID, "twice", call_id="c")
    orphan = Violation(ViolationKind.ORPHAN_TOOL_RESULT, "nobody asked", call_id="o")
    steps = [build_step("one", violations=[dup, orphan]), build_step("two", violations=[dup])]
    StoreWriter(engine).write_batch(steps)
    engine.dispose()
    gw = await make_gateway()
    status, body = await _get(gw, "/api/violations", trace_id="one", limit="1")
    assert status == 200 and [v["trace_id"] for v in body["violations"]] == ["one"]
    _, rest = await _get(gw, "/api/violations", trace_id="one", cursor=body["next_cursor"])
    assert rest["next_cursor"] is None
    kinds = {v["kind"] for v in body["violations"] + rest["violations"]}
    assert kinds == {"duplicate_call_id", "orphan_tool_result"}
    _, both = await _get(gw, "/api/violations", trace_id="two", kind="duplicate_call_id")
    found = [(v["trace_id"], v["kind"]) for v in both["violations"]]
    assert found == [("two", "duplicate_call_id")]
    _, none = await _get(gw, "/api/violations", trace_id="two", kind="orphan_tool_result")
    _, unknown = await _get(gw, "/api/violations", trace_id="tr_nobody")
    assert none["violations"] == unknown["violations"] == []
