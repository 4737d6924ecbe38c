"""The Responses API over a WebSocket through the gateway: the upgrade proxied to the
provider's socket, frames both ways unchanged, each `response.create` a step of its trace
(threading, pairing, budgets), a refusal an `error` event, 426 when the provider has no
socket. The provider is the fake one's WebSocket mode (tests/fakes/responses_socket.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import openai
import pytest

from tests import harness
from tests.fakes.provider import Reply
from tests.fakes.responses import function_call, message, response, streamed, usage
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

KEY = "sk-test-socketkey1234567890"
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


@asynccontextmanager
async def socket(gw: Gateway, **headers: str) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            gw.url + "/v1/responses", headers={"Authorization": f"Bearer {KEY}", **headers}
        ) as ws,
    ):
        yield ws


def create(**fields: Any) -> str:
    return json.dumps({"type": "response.create", "model": "gpt-5", **fields})


async def response_frames(ws: aiohttp.ClientWebSocketResponse) -> list[str]:
    """The frames of one response, up to its final event."""
    frames: list[str] = []
    while True:
        text = await ws.receive_str()
        frames.append(text)
        if json.loads(text)["type"] in TERMINAL:
            return frames


def weather_replies() -> list[Reply]:
    asking = response(
        [function_call("call_paris", "get_weather", {"city": "Paris"})],
        response_id="resp_1",
        use=usage(40, 12),
    )
    answering = response([message("Paris is sunny.")], response_id="resp_2", use=usage(60, 8))
    return [streamed(asking), streamed(answering)]


async def test_frames_pass_unchanged_both_ways_and_a_response_is_a_step(gateway: Gateway) -> None:
    gateway.provider.queue(streamed(response([message("Hello!")], use=usage(12, 3))))
    sent = create(input="Say hello.", instructions="Be brief.", stream_id=None)
    async with socket(gateway) as ws:
        await ws.send_str(sent)
        frames = await response_frames(ws)
    fake = gateway.provider.socket
    assert fake.frames == [sent]  # the client's frame, as sent
    assert frames == fake.sent  # the provider's, as sent, in order
    assert fake.upgrades[0]["Authorization"] == f"Bearer {KEY}"
    assert gateway.provider.received == []  # nothing went over HTTP
    (trace,) = await gateway.traces()
    (step,) = (await gateway.trace(trace["id"]))["steps"]
    assert (step["protocol"], step["stop_reason"], step["http_status"]) == (
        "responses",
        "completed",
        200,
    )
    assert [i["kind"] for i in step["input_items"]] == ["instruction", "user"]
    assert [(i["kind"], i["text"]) for i in step["output_items"]] == [("assistant_text", "Hello!")]
    assert step["usage"]["total_tokens"] == 15
    assert step["provider_request_id"] == "req_fake_socket"
    assert step["ttft_ms"] is not None


async def test_a_tool_loop_on_one_socket_is_one_trace_with_its_call_answered(
    gateway: Gateway,
) -> None:
    gateway.provider.queue(*weather_replies())
    async with socket(gateway) as ws:
        await ws.send_str(create(input="Weather in Paris?", tools=TOOLS))
        first = await response_frames(ws)
        # Only the new item, continuing the response the provider holds on this socket.
        result = {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"}
        await ws.send_str(create(previous_response_id="resp_1", input=[result], tools=TOOLS))
        second = await response_frames(ws)
    assert json.loads(first[-1])["response"]["id"] == "resp_1"
    assert json.loads(second[-1])["type"] == "response.completed"
    (listed,) = await gateway.traces()
    trace = await gateway.trace(listed["id"])
    steps = sorted(trace["steps"], key=lambda s: s["seq"])
    assert [s["stop_reason"] for s in steps] == ["tool_calls", "completed"]
    assert [i["call_id"] for i in steps[0]["output_items"] if i["kind"] == "tool_call"] == [
        "call_paris"
    ]
    assert [(i["kind"], i["call_id"]) for i in steps[1]["input_items"]] == [
        ("tool_result", "call_paris")
    ]
    assert trace["violations"] == [] and trace["status"] == "completed"


async def test_a_warm_up_is_no_step_and_the_request_continuing_it_has_its_input(
    gateway: Gateway,
) -> None:
    gateway.provider.queue(streamed(response([message("Done.")], response_id="resp_real")))
    async with socket(gateway) as ws:
        await ws.send_str(
            create(input="Tidy the repo.", instructions="You are a coder.", generate=False)
        )
        warm = await response_frames(ws)
        warm_id = json.loads(warm[-1])["response"]["id"]
        # Instructions are not carried over from a response continued: sent again.
        await ws.send_str(
            create(previous_response_id=warm_id, input=[], instructions="You are a coder.")
        )
        await response_frames(ws)
    (listed,) = await gateway.traces()
    (step,) = (await gateway.trace(listed["id"]))["steps"]
    assert [(i["kind"], i["text"]) for i in step["input_items"]] == [
        ("instruction", "You are a coder."),
        ("user", "Tidy the repo."),
    ]
    assert step["response_id"] == "resp_real"


async def test_a_budget_refusal_is_an_error_event_with_the_rules_code(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(max_steps=1)
    gw.provider.queue(*weather_replies())
    async with socket(gw) as ws:
        await ws.send_str(create(input="Weather in Paris?", tools=TOOLS))
        await response_frames(ws)
        result = {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"}
        await ws.send_str(create(previous_response_id="resp_1", input=[result], tools=TOOLS))
        (refusal,) = await response_frames(ws)
        # The socket stays open: the client may go on (or fall back) as it likes.
        await ws.send_str(create(previous_response_id="resp_1", input=[result], tools=TOOLS))
        (again,) = await response_frames(ws)
    event = json.loads(refusal)
    assert (event["type"], event["status"]) == ("error", 429)
    assert event["error"]["code"] == "step_budget_exceeded"
    assert event["error"]["type"] == "budget_exceeded"
    assert event["error"]["headers"]["x-should-retry"] == "false"
    assert json.loads(again)["error"]["code"] == "step_budget_exceeded"
    assert len(gw.provider.socket.frames) == 1  # the refused requests never left
    (listed,) = await gw.traces()
    trace = await gw.trace(listed["id"])
    assert event["error"]["headers"]["X-Loopwatch-Trace-Id"] == trace["id"]
    assert trace["step_count"] == 1 and trace["status"] == "budget_exceeded"
    assert {v["kind"] for v in trace["violations"]} == {"step_budget_exceeded"}


async def test_a_token_budget_clamps_the_frame_sent_keeping_its_envelope(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(max_tokens=500)
    gw.provider.queue(streamed(response([message("Short.")], use=usage(20, 5))))
    async with socket(gw) as ws:
        await ws.send_str(create(input="Be long.", max_output_tokens=4000, stream_id="main"))
        await response_frames(ws)
    (sent,) = [json.loads(f) for f in gw.provider.socket.frames]
    assert (sent["type"], sent["stream_id"], sent["input"]) == (
        "response.create",
        "main",
        "Be long.",
    )
    assert sent["max_output_tokens"] == 500


async def test_the_providers_error_event_is_a_failed_step(gateway: Gateway) -> None:
    async with socket(gateway) as ws:
        await ws.send_str(create(previous_response_id="resp_gone", input="Go on."))
        (error,) = await response_frames(ws)
    assert json.loads(error)["error"]["code"] == "previous_response_not_found"
    (listed,) = await gateway.traces()
    (step,) = (await gateway.trace(listed["id"]))["steps"]
    assert (step["http_status"], step["stop_reason"]) == (400, "error")
    assert step["error"]["code"] == "previous_response_not_found"


async def test_a_pairing_refusal_names_the_rule_on_the_requests_lane(gateway: Gateway) -> None:
    orphan = {"type": "function_call_output", "call_id": "call_nowhere", "output": "42"}
    async with socket(gateway) as ws:
        await ws.send_str(create(input=[orphan], stream_id="lane-7"))
        (refusal,) = await response_frames(ws)
    event = json.loads(refusal)
    assert (event["status"], event["stream_id"]) == (400, "lane-7")
    assert event["error"]["code"] == "orphan_tool_result"
    assert "call_nowhere" in event["error"]["message"]
    assert gateway.provider.socket.frames == []


async def test_lanes_interleave_and_each_response_is_its_own_step(gateway: Gateway) -> None:
    gate = asyncio.Event()
    slow = streamed(response([message("Slow lane answer.")], response_id="resp_slow"))
    slow.gate = gate  # its first event, then nothing until the other lane is done
    fast = streamed(response([message("Fast lane answer.")], response_id="resp_fast"))
    gateway.provider.queue(slow, fast)
    async with socket(gateway) as ws:
        await ws.send_str(create(input="First question", stream_id="slow"))
        first = json.loads(await ws.receive_str())
        assert (first["type"], first["stream_id"]) == ("response.created", "slow")
        await ws.send_str(create(input="Second question", stream_id="fast"))
        fast_frames = await response_frames(ws)
        gate.set()
        slow_frames = await response_frames(ws)
    assert {json.loads(f)["stream_id"] for f in fast_frames} == {"fast"}
    assert {json.loads(f)["stream_id"] for f in slow_frames} == {"slow"}
    steps = [s for t in await gateway.traces() for s in (await gateway.trace(t["id"]))["steps"]]
    answers = {s["input_items"][0]["text"]: s["output_items"][0]["text"] for s in steps}
    assert answers == {
        "First question": "Slow lane answer.",
        "Second question": "Fast lane answer.",
    }


async def test_a_provider_that_refuses_the_upgrade_gets_the_client_a_426(gateway: Gateway) -> None:
    gateway.provider.socket.refuse = 404
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(gateway.url + "/v1/responses")
        async with session.get(
            gateway.url + "/v1/responses",
            headers={
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            },
        ) as answer:
            body = await answer.json()
    assert refused.value.status == 426
    assert answer.status == 426
    assert body["error"]["code"] == "websocket_upgrade_refused"
    assert await gateway.traces() == []


async def test_a_client_gone_mid_response_is_a_cancelled_step(gateway: Gateway) -> None:
    gate = asyncio.Event()
    held = streamed(response([message("Never finished.")]))
    held.gate = gate
    gateway.provider.queue(held)
    async with socket(gateway) as ws:
        await ws.send_str(create(input="Start, then I leave."))
        await ws.receive_str()
    await asyncio.wait_for(gateway.provider.socket.closed.wait(), 10)
    gate.set()
    (listed,) = await gateway.traces()
    (step,) = (await gateway.trace(listed["id"]))["steps"]
    assert step["stop_reason"] == "cancelled"
    assert [i["text"] for i in step["input_items"]] == ["Start, then I leave."]


async def test_a_provider_gone_mid_response_is_an_interrupted_step(gateway: Gateway) -> None:
    cut = streamed(response([message("Cut short.")]))
    cut.die_after = 3
    gateway.provider.queue(cut)
    async with socket(gateway) as ws:
        await ws.send_str(create(input="Go."))
        frames = []
        while (received := await ws.receive()).type is aiohttp.WSMsgType.TEXT:
            frames.append(received.data)
        assert (received.type, received.data) == (aiohttp.WSMsgType.CLOSE, 1011)  # passed on
    assert len(frames) == 3
    (listed,) = await gateway.traces()
    trace = await gateway.trace(listed["id"])
    (step,) = trace["steps"]
    assert step["stop_reason"] == "interrupted"
    assert [v["kind"] for v in trace["violations"]] == ["stream_interrupted"]


async def test_a_stopping_gateway_closes_idle_sockets_and_lets_open_responses_end(
    gateway: Gateway,
) -> None:
    """At the stop (aiohttp's on_shutdown) an idle socket closes at once, going away (1001);
    one with a response in flight closes once that response has ended, recorded whole."""
    gate = asyncio.Event()
    busy_reply = streamed(response([message("Finished anyway.")], response_id="resp_busy"))
    busy_reply.gate = gate
    gateway.provider.queue(streamed(response([message("Idle now.")])), busy_reply)
    async with socket(gateway) as idle, socket(gateway) as busy:
        await idle.send_str(create(input="One turn."))
        await response_frames(idle)
        await busy.send_str(create(input="A long turn."))
        await busy.receive_str()  # in flight
        await gateway.app.shutdown()
        closed = await idle.receive()
        assert (closed.type, closed.data) == (aiohttp.WSMsgType.CLOSE, 1001)  # going away
        gate.set()
        rest = await response_frames(busy)
        closed = await busy.receive()
        assert (closed.type, closed.data) == (aiohttp.WSMsgType.CLOSE, 1001)
    assert json.loads(rest[-1])["type"] == "response.completed"
    steps = [s for t in await gateway.traces() for s in (await gateway.trace(t["id"]))["steps"]]
    assert sorted(s["stop_reason"] for s in steps) == ["completed", "completed"]


async def test_the_official_sdk_runs_a_turn_over_the_socket(gateway: Gateway) -> None:
    gateway.provider.queue(streamed(response([message("Hi from the socket.")])))
    sdk = gateway.closing(openai.AsyncOpenAI(base_url=gateway.openai_base, api_key=KEY))
    kinds = []
    async with sdk.responses.connect() as connection:
        await connection.response.create(model="gpt-5", input="Hello?")
        async for event in connection:
            kinds.append(event.type)
            if event.type == "response.completed":
                assert event.response.output_text == "Hi from the socket."
                break
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    (listed,) = await gateway.traces()
    (step,) = (await gateway.trace(listed["id"]))["steps"]
    assert step["output_items"][0]["text"] == "Hi from the socket."


async def test_a_plain_get_of_the_path_is_still_passed_through(gateway: Gateway) -> None:
    gateway.provider.queue(Reply(body={"object": "list", "data": []}))
    async with (
        aiohttp.ClientSession() as session,
        session.get(gateway.url + "/v1/responses") as answer,
    ):
        assert answer.status == 200
    assert [(r.method, r.path) for r in gateway.provider.received] == [("GET", "/v1/responses")]
    assert gateway.provider.socket.upgrades == []


async def test_a_bad_trace_header_refuses_the_upgrade(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(
                gateway.url + "/v1/responses", headers={"X-Loopwatch-Trace-Id": "bad id!"}
            )
    assert refused.value.status == 400
    assert gateway.provider.socket.upgrades == []
