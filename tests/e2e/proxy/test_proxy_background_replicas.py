"""Background Responses across gateways sharing one store (replicas behind a load balancer, on
PostgreSQL or one SQLite file): the response created through one, polled, resumed or
cancelled through another, is one step, ended by whichever exchange sees its end, once."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import openai
import pytest

from gateway.config import RedactionPattern, RedactionSettings
from tests import harness
from tests.conftest import Database
from tests.fakes.provider import Received, Reply
from tests.fakes.responses import function_call, message, reply, usage
from tests.fakes.responses_background import at, background, events, sse_reply
from tests.harness import Gateway

provider = harness.provider
make_gateway = harness.make_gateway


def client(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-bg", max_retries=0)
    )


async def created_on(gw: Gateway, **kwargs: Any) -> str:
    """Create a background response through `gw`; its step is open in the store after."""
    response = await client(gw).responses.create(
        model="gpt-5", input="Work on it.", background=True, **kwargs
    )
    await gw.deps.open_responses.settled()  # its row written: the load balancer may turn
    return response.id


async def all_steps(gw: Gateway) -> list[dict[str, Any]]:
    traces = [await gw.trace(summary["id"]) for summary in await gw.traces()]
    return [step for trace in traces for step in trace["steps"]]


async def replicas(make: harness.GatewayFactory, count: int = 2, **settings: Any) -> list[Gateway]:
    return [await make(**settings) for _ in range(count)]


async def test_polls_through_another_gateway_end_the_step(
    make_gateway: harness.GatewayFactory,
) -> None:
    creating, polling = await replicas(make_gateway)
    body = background([message("Done elsewhere.")], "resp_rep1", use=usage(40, 8))
    creating.provider.queue(
        reply(at(body, "queued")), reply(at(body, "in_progress")), reply(at(body, "completed"))
    )
    response_id = await created_on(creating)
    assert (await client(polling).responses.retrieve(response_id)).status == "in_progress"
    assert await all_steps(polling) == []  # still open: no step, and the poll is none
    done = await client(polling).responses.retrieve(response_id)
    assert done.output_text == "Done elsewhere."

    (step,) = await all_steps(polling)
    assert step["protocol"] == "responses"
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("completed", "completed")
    assert step["response_id"] == "resp_rep1"
    assert step["provider_request_id"] == "req_resp_rep1"  # the creating request's
    assert [(i["kind"], i["text"]) for i in step["output_items"]] == [
        ("assistant_text", "Done elsewhere.")
    ]
    assert (step["usage"]["prompt_tokens"], step["usage"]["completion_tokens"]) == (40, 8)
    assert [i["text"] for i in step["input_items"]] == ["Work on it."]
    assert step["latency_ms"] > 0
    # The creating gateway stops: the step it still holds was ended elsewhere, not again.
    await creating.deps.open_responses.close()
    assert [s["stop_reason"] for s in await all_steps(creating)] == ["completed"]


async def test_a_cancel_through_another_gateway_ends_the_step_cancelled(
    make_gateway: harness.GatewayFactory,
) -> None:
    creating, cancelling = await replicas(make_gateway)
    body = background([], "resp_rep2", use=usage(12, 0))
    creating.provider.queue(reply(at(body, "queued")), reply(at(body, "cancelled")))
    response_id = await created_on(creating)
    cancelled = await client(cancelling).responses.cancel(response_id)
    assert cancelled.status == "cancelled"

    (step,) = await all_steps(cancelling)
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("cancelled", "cancelled")
    assert step["usage"]["prompt_tokens"] == 12
    assert step["output_items"] == []


async def test_a_stream_resumed_through_another_gateway_ends_the_step(
    make_gateway: harness.GatewayFactory,
) -> None:
    creating, resuming = await replicas(make_gateway)
    body = background([message("Streamed on elsewhere.")], "resp_rep3", use=usage(30, 5))
    sent = events(body)
    creating.provider.queue(sse_reply(sent[:3]), sse_reply(sent[3:]))
    first = await client(creating).responses.create(
        model="gpt-5", input="Stream it.", background=True, stream=True
    )
    seen = [event async for event in first]
    await creating.deps.open_responses.settled()
    resumed = await client(resuming).responses.retrieve(
        "resp_rep3", stream=True, starting_after=seen[-1].sequence_number
    )
    assert [event async for event in resumed][-1].type == "response.completed"

    (step,) = await all_steps(resuming)
    assert (step["stream"], step["stop_reason"]) == (True, "completed")
    assert [i["text"] for i in step["output_items"]] == ["Streamed on elsewhere."]
    assert step["usage"]["total_tokens"] == 35


async def test_calls_seen_through_another_gateway_are_judged_by_the_declared_tools(
    make_gateway: harness.GatewayFactory,
) -> None:
    creating, polling = await replicas(make_gateway)
    tools: list[Any] = [{"type": "function", "name": "get_weather", "parameters": {}}]
    call = function_call("call_1", "get_wether", {"city": "Oslo"})  # no tool of that name
    body = background([call], "resp_rep6", use=usage(25, 6))
    creating.provider.queue(reply(at(body, "queued")), reply(at(body, "completed")))
    response_id = await created_on(creating, tools=tools)
    await client(polling).responses.retrieve(response_id)

    (summary,) = await polling.traces()
    trace = await polling.trace(summary["id"])
    assert [s["stop_reason"] for s in trace["steps"]] == ["tool_calls"]
    assert [(v["kind"], v["call_id"]) for v in trace["violations"]] == [
        ("undeclared_tool", "call_1")
    ]


@pytest.mark.parametrize("creator_polls", [True, False], ids=["creator-and-other", "two-others"])
async def test_gateways_racing_to_see_the_end_record_it_once(
    make_gateway: harness.GatewayFactory, creator_polls: bool
) -> None:
    creating, *others = await replicas(make_gateway, 3)
    body = background([message("Seen twice.")], "resp_rep4", use=usage(20, 2))
    # The provider answers neither poll before it has both: each is on its way, open step
    # found, when either can see the end.
    both_in, arrived = asyncio.Event(), []

    def held(received: Received) -> Reply:
        arrived.append(received)
        if len(arrived) == 2:
            both_in.set()
        return dataclasses.replace(reply(at(body, "completed")), hold=both_in)

    creating.provider.queue(reply(at(body, "queued")), held, held)
    response_id = await created_on(creating)
    polling = [creating, others[0]] if creator_polls else others
    polls = await asyncio.gather(*(client(gw).responses.retrieve(response_id) for gw in polling))
    assert [p.status for p in polls] == ["completed", "completed"]
    await creating.deps.open_responses.close()
    for gw in (creating, *others):
        await gw.flush()  # the step's record is spooled by the gateway that ended it

    steps = await all_steps(creating)
    assert [(s["stop_reason"], s["usage"]["total_tokens"]) for s in steps] == [("completed", 22)]


@pytest.mark.postgres
async def test_the_budget_is_settled_once_by_the_gateway_that_saw_the_end(
    make_gateway: harness.GatewayFactory, database: Database
) -> None:
    if database.dialect != "postgresql":
        pytest.skip("the budget ledger is shared by replicas on PostgreSQL")
    creating, polling = await replicas(make_gateway, max_tokens=1000)
    body = background([message("Counted once.")], "resp_rep5", use=usage(40, 8))
    creating.provider.queue(reply(at(body, "queued")), reply(at(body, "completed")))
    headers = {"X-Loopwatch-Trace-Id": "bg-budget-run"}
    response_id = await created_on(creating, extra_headers=headers)
    await client(polling).responses.retrieve(response_id)
    # The poll's end is taken off its exchange: done before the creating gateway stops, or
    # the stop could take the row first and record the step unended.
    await polling.deps.open_responses.settled()
    await creating.deps.open_responses.close()
    for gw in (polling, creating):
        await gw.flush()
        await gw.deps.ledger.close()  # its settlement writes done (as at the gateway's stop)

    conn = database.raw_connect()
    try:
        query = (
            "SELECT steps, tokens_spent, tokens_in_flight FROM budget_ledger WHERE trace_id = %s"
        )
        row = conn.execute(query, ("bg-budget-run",)).fetchone()
    finally:
        conn.close()
    assert tuple(row) == (1, 48, 0)


# A key the built-in rules redact (tests/redaction/test_redaction.py's form).
SECRET = "sk-proj-Bg7mQ2xV9nL4kJ8hG3fD6sA1pZ0wE5rTy"
CLIENT_KEY = "sk-proj-ClientKeyOfTheRun0123456789abcd"


def open_rows(database: Database) -> list[str]:
    """The `open_responses` table's rows, every column as stored, read by the driver."""
    conn = database.raw_connect()
    try:
        rows = conn.execute("SELECT * FROM open_responses").fetchall()
    finally:
        conn.close()
    return [" ".join(str(value) for value in row) for row in rows]


async def created_with_secret(gw: Gateway, response_id: str) -> str:
    """A background response whose input and declared tool hold a key, created through `gw`
    with a key of its own; the provider answers `completed` to the next poll."""
    body = background([message("Rotated.")], response_id, use=usage(30, 4))
    gw.provider.queue(reply(at(body, "queued")), reply(at(body, "completed")))
    tools: list[Any] = [
        {"type": "function", "name": "rotate", "description": f"Old: {SECRET}", "parameters": {}}
    ]
    sdk = gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key=CLIENT_KEY, max_retries=0))
    created = await sdk.responses.create(
        model="gpt-5", input=f"Rotate {SECRET} to passwordHunter2.", background=True, tools=tools
    )
    await gw.deps.open_responses.settled()
    return created.id


async def step_of(gw: Gateway, response_id: str) -> dict[str, Any]:
    await gw.deps.open_responses.settled()
    await gw.flush()
    (step,) = [s for s in await all_steps(gw) if s["response_id"] == response_id]
    # What differs between any two runs of one exchange.
    for name in ("id", "trace_id", "started_at", "ended_at", "latency_ms", "ttft_ms"):
        step.pop(name, None)
    for name in ("response_id", "provider_request_id"):
        step[name] = step[name].removesuffix("_single").removesuffix("_shared")
    return step


async def test_an_open_row_holds_only_what_redaction_lets_through(
    make_gateway: harness.GatewayFactory, database: Database
) -> None:
    # A configured pattern that matches its own marker ("password]"): a step redacted twice
    # would show it.
    own = RedactionPattern(name="password", regex=r"password\S*")
    redaction = RedactionSettings(patterns=(own,))
    creating, polling, single = await replicas(make_gateway, 3, redaction=redaction)
    response_id = await created_with_secret(creating, "resp_secret_shared")
    (row,) = open_rows(database)
    assert response_id in row  # the step is open in the store, written as stored steps are
    assert SECRET not in row and CLIENT_KEY not in row and "Hunter2" not in row
    assert "[REDACTED:api_key]" in row
    await client(polling).responses.retrieve(response_id)
    shared = await step_of(polling, response_id)
    assert open_rows(database) == []  # taken by the gateway that saw the end

    # The same exchange created and ended through one gateway: the step is recorded alike,
    # its redacted parts redacted once.
    alone = await created_with_secret(single, "resp_secret_single")
    await client(single).responses.retrieve(alone)
    assert shared == await step_of(single, alone)
    assert [i["text"] for i in shared["input_items"]] == [
        "Rotate [REDACTED:api_key] to [REDACTED:password]"
    ]
