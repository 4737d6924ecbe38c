"""Background Responses through the gateway with the official openai SDK: the creating request
answered at once, then polls, a resumed stream or a cancel; one step, ended by whichever
exchange sees the response's end."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests import harness
from tests.conftest import Database
from tests.fakes.responses import function_call, message, reply, usage
from tests.fakes.responses_background import at, background, events, sse_reply
from tests.harness import Gateway

provider = harness.provider
make_gateway, gateway = harness.make_gateway, harness.gateway

pytestmark = pytest.mark.sqlite

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def client(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-bg", max_retries=0)
    )


async def only_step(gw: Gateway) -> dict[str, Any]:
    traces = await gw.traces()
    assert len(traces) == 1
    trace = await gw.trace(traces[0]["id"])
    assert len(trace["steps"]) == 1
    assert trace["violations"] == []  # a stream cut short that a resumed one ended included
    step: dict[str, Any] = trace["steps"][0]
    return step


async def test_polls_end_the_step_with_the_final_status(gateway: Gateway) -> None:
    body = background([message("Done in the background.")], "resp_bg1", use=usage(40, 8))
    gateway.provider.queue(
        reply(at(body, "queued")), reply(at(body, "in_progress")), reply(at(body, "completed"))
    )
    sdk = client(gateway)
    created = await sdk.responses.create(model="gpt-5", input="Work on it.", background=True)
    assert created.status == "queued"
    polled = await sdk.responses.retrieve(created.id)
    assert polled.status == "in_progress"
    assert await gateway.traces() == []  # the step is open: nothing recorded yet
    assert len(gateway.deps.open_responses) == 1
    done = await sdk.responses.retrieve(created.id)
    assert done.output_text == "Done in the background."

    step = await only_step(gateway)
    assert step["protocol"] == "responses"
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("completed", "completed")
    assert step["response_id"] == "resp_bg1"
    assert [(i["kind"], i["text"]) for i in step["output_items"]] == [
        ("assistant_text", "Done in the background.")
    ]
    assert (step["usage"]["prompt_tokens"], step["usage"]["completion_tokens"]) == (40, 8)
    assert step["provider_request_id"] == "req_resp_bg1"  # the creating request's
    # The polls went to the provider unchanged.
    polls = gateway.provider.received[1:]
    assert [(r.method, r.path) for r in polls] == [("GET", "/v1/responses/resp_bg1")] * 2
    assert len(gateway.deps.open_responses) == 0


async def test_a_resumed_stream_ends_the_step(gateway: Gateway) -> None:
    body = background([message("Streamed on.")], "resp_bg2", use=usage(30, 5))
    sent = events(body)
    # The first stream stops after `in_progress`; the client resumes after its last event.
    gateway.provider.queue(sse_reply(sent[:3]), sse_reply(sent[3:]))
    sdk = client(gateway)
    first = await sdk.responses.create(
        model="gpt-5", input="Stream it.", background=True, stream=True
    )
    seen = [event async for event in first]
    assert [e.type for e in seen] == ["response.created", "response.queued", "response.in_progress"]
    assert await gateway.traces() == []  # a stream cut short leaves the step open
    last = seen[-1].sequence_number
    resumed = await sdk.responses.retrieve("resp_bg2", stream=True, starting_after=last)
    rest = [event async for event in resumed]
    assert rest[-1].type == "response.completed"
    assert sorted(gateway.provider.received[1].query.split("&")) == [
        f"starting_after={last}",
        "stream=true",
    ]

    step = await only_step(gateway)
    assert step["stream"] is True
    assert (step["stop_reason"], step["response_id"]) == ("completed", "resp_bg2")
    assert [i["text"] for i in step["output_items"]] == ["Streamed on."]
    assert step["usage"]["total_tokens"] == 35


async def test_a_cancel_ends_the_step_as_cancelled(gateway: Gateway) -> None:
    body = background([], "resp_bg3", use=usage(12, 0))
    gateway.provider.queue(reply(at(body, "queued")), reply(at(body, "cancelled")))
    sdk = client(gateway)
    created = await sdk.responses.create(model="gpt-5", input="Never mind.", background=True)
    cancelled = await sdk.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    received = gateway.provider.received[1]
    assert (received.method, received.path) == ("POST", "/v1/responses/resp_bg3/cancel")

    step = await only_step(gateway)
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("cancelled", "cancelled")
    assert step["usage"]["prompt_tokens"] == 12


async def test_a_poll_before_the_end_and_a_failed_poll_are_no_steps(gateway: Gateway) -> None:
    body = background([message("Late.")], "resp_bg4")
    missing = {"error": {"message": "No response found", "type": "invalid_request_error"}}
    gateway.provider.queue(
        reply(at(body, "queued")),
        reply(missing, status=404),
        reply(at(body, "in_progress")),
        reply(at(body, "completed")),
    )
    sdk = client(gateway)
    created = await sdk.responses.create(model="gpt-5", input="Go.", background=True)
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(created.id)
    await sdk.responses.retrieve(created.id)
    assert await gateway.traces() == []
    await sdk.responses.retrieve(created.id)
    step = await only_step(gateway)
    assert step["stop_reason"] == "completed"


async def test_a_background_tool_loop_is_one_trace(gateway: Gateway) -> None:
    first = background(
        [function_call("call_bg", "get_weather", {"city": "Oslo"})], "resp_bg5", use=usage(50, 9)
    )
    second = background(
        [message("Oslo is snowy.")], "resp_bg6", use=usage(70, 4), previous_response_id="resp_bg5"
    )
    gateway.provider.queue(
        reply(at(first, "queued")),
        reply(at(first, "completed")),
        reply(at(second, "in_progress")),
        reply(at(second, "completed")),
    )
    sdk = client(gateway)
    created = await sdk.responses.create(
        model="gpt-5", input="Weather in Oslo?", tools=TOOLS, background=True
    )
    done = await sdk.responses.retrieve(created.id)
    call = done.output[0]
    assert call.type == "function_call"
    assert json.loads(call.arguments) == {"city": "Oslo"}
    following = await sdk.responses.create(
        model="gpt-5",
        previous_response_id=done.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snowy"}],
        tools=TOOLS,
        background=True,
    )
    answer = await sdk.responses.retrieve(following.id)
    assert answer.output_text == "Oslo is snowy."

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["violation_count"] == 0
    one, two = trace["steps"]
    assert (one["stop_reason"], two["stop_reason"]) == ("tool_calls", "completed")
    assert [(i["kind"], i["call_id"]) for i in two["input_items"]] == [("tool_result", "call_bg")]
    assert trace["usage"]["total_tokens"] == 59 + 74


async def test_a_response_never_seen_ending_is_recorded_unknown_at_stop(gateway: Gateway) -> None:
    body = background([message("Never polled.")], "resp_bg7")
    gateway.provider.queue(reply(at(body, "queued")))
    await client(gateway).responses.create(model="gpt-5", input="Go.", background=True)
    await gateway.deps.open_responses.settled()
    assert len(gateway.deps.open_responses) == 1
    # The gateway stops: the step it holds is recorded as far as its creation saw it.
    await gateway.deps.open_responses.close()
    step = await only_step(gateway)
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("unknown", "queued")
    assert step["response_id"] == "resp_bg7"
    assert step["output_items"] == []
    # Nobody else can end it now: a late poll is a plain step.
    gateway.provider.queue(reply(at(body, "completed")))
    await client(gateway).responses.retrieve("resp_bg7")
    traces = [await gateway.trace(summary["id"]) for summary in await gateway.traces()]
    protocols = sorted(step["protocol"] for trace in traces for step in trace["steps"])
    assert protocols == ["passthrough", "responses"]


async def test_a_step_the_store_could_not_share_is_ended_by_its_own_gateway(
    gateway: Gateway, database: Database
) -> None:
    conn = database.raw_connect()
    conn.execute("DROP TABLE open_responses")  # the store refuses the open step
    conn.close()
    body = background([message("Kept here.")], "resp_bg8", use=usage(9, 3))
    gateway.provider.queue(reply(at(body, "queued")), reply(at(body, "completed")))
    created = await client(gateway).responses.create(model="gpt-5", input="Go.", background=True)
    await gateway.deps.open_responses.settled()
    done = await client(gateway).responses.retrieve(created.id)
    assert done.status == "completed"
    step = await only_step(gateway)
    assert (step["stop_reason"], step["usage"]["total_tokens"]) == ("completed", 12)
