"""`POST /v1/responses/compact` through the gateway with the official SDK: the compaction is
a step of the run it compacts, and the request that goes on from the compacted history
continues that run, on one gateway or another sharing its store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from tests import harness
from tests.fakes.responses import function_call, message, reply, response
from tests.harness import Gateway

provider = harness.provider
make_gateway, gateway = harness.make_gateway, harness.gateway

FIXTURE = Path(__file__).parents[2] / "fixtures" / "responses" / "nonstream_compact.json"
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
QUESTION = "What is the weather in Paris?"


def compacted() -> dict[str, Any]:
    """The compact endpoint's answer (see the fixture's source)."""
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))["response"]
    return data


def client(gw: Gateway, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base,
            api_key="sk-test-clientkey1234567890",
            max_retries=0,
            default_headers=headers or None,
        )
    )


async def _call_and_compact(gw: Gateway, sdk: openai.AsyncOpenAI) -> Any:
    """A step that calls a tool, then the compaction of the history with its result."""
    gw.provider.queue(
        reply(
            response(
                [function_call("call_paris", "get_weather", {"city": "Paris"})],
                response_id="resp_1",
            )
        ),
        reply(compacted()),
    )
    first = await sdk.responses.create(model="gpt-5", input=QUESTION, tools=TOOLS)
    history: list[Any] = [
        {"role": "user", "content": QUESTION},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "function_call_output", "call_id": "call_paris", "output": "sunny, 24C"},
    ]
    return await sdk.responses.compact(model="gpt-5", input=history)


def _going_on(compaction: Any) -> list[Any]:
    """The compacted history as Codex sends it back (its compaction item has no id), and
    a new user turn."""
    # The SDK types the kept user messages as output messages: dumped as they came.
    kept = [item.model_dump(exclude_none=True, warnings=False) for item in compaction.output]
    for item in kept:
        if item.get("type") == "compaction":
            item.pop("id", None)
            item.pop("created_by", None)
    return [*kept, {"role": "user", "content": "And tomorrow?"}]


async def test_a_loop_through_a_compaction_is_one_trace(gateway: Gateway) -> None:
    sdk = client(gateway)
    compaction = await _call_and_compact(gateway, sdk)
    assert compaction.output[-1].type == "compaction"
    gateway.provider.queue(reply(response([message("Sunny again.")], response_id="resp_3")))
    final = await sdk.responses.create(model="gpt-5", input=_going_on(compaction), tools=TOOLS)
    assert final.output_text == "Sunny again."

    # Forwarded as sent: nothing added to a body the endpoint would refuse.
    sent = gateway.provider.received[1]
    assert sent.path == "/v1/responses/compact"
    assert set(sent.json()) == {"model", "input"}

    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["status"] == "completed" and trace["violations"] == []
    first, compact, going_on = trace["steps"]
    assert compact["protocol"] == "responses"
    assert compact["attrs"]["operation"] == "compact"
    assert compact["stream"] is False and compact["stop_reason"] == "completed"
    assert compact["usage"]["prompt_tokens"] == 1240
    assert [(i["kind"], i["call_id"]) for i in compact["input_items"]] == [
        ("tool_result", "call_paris")
    ]
    item = compact["output_items"][-1]
    assert (item["kind"], item["attrs"]["type"]) == ("other", "compaction")
    assert item["attrs"]["item_ids"] == ["cmp_68c42e11"]
    assert "LWMARKER" not in json.dumps(trace)
    # What follows the compaction item is new; the history it replaced is not repeated.
    assert [(i["kind"], i["text"]) for i in going_on["input_items"]] == [("user", "And tomorrow?")]
    assert "operation" not in first["attrs"] and "operation" not in going_on["attrs"]


async def test_the_run_goes_on_through_another_gateway_on_the_same_store(
    make_gateway: harness.GatewayFactory,
) -> None:
    """The compaction is found in the store: the second gateway never saw it."""
    one, two = await make_gateway(), await make_gateway()
    compaction = await _call_and_compact(one, client(one))
    await one.flush()
    two.provider.queue(reply(response([message("Sunny again.")], response_id="resp_3")))
    await client(two).responses.create(model="gpt-5", input=_going_on(compaction), tools=TOOLS)
    traces = await two.traces()
    assert len(traces) == 1
    trace = await two.trace(traces[0]["id"])
    assert trace["step_count"] == 3 and trace["violations"] == []
    assert trace["status"] == "completed"


async def test_a_later_step_continues_its_newest_step_not_the_compaction(
    gateway: Gateway,
) -> None:
    """Every request after a compaction still carries it: the run's history decides."""
    sdk = client(gateway)
    compaction = await _call_and_compact(gateway, sdk)
    history = _going_on(compaction)
    gateway.provider.queue(
        reply(
            response(
                [function_call("call_rome", "get_weather", {"city": "Rome"})],
                response_id="resp_3",
            )
        ),
        reply(response([message("Rainy in Rome.")], response_id="resp_4")),
    )
    third = await sdk.responses.create(model="gpt-5", input=history, tools=TOOLS)
    history += [item.model_dump(exclude_none=True) for item in third.output]
    history.append({"type": "function_call_output", "call_id": "call_rome", "output": "rain"})
    await sdk.responses.create(model="gpt-5", input=history, tools=TOOLS)
    traces = await gateway.traces()
    assert len(traces) == 1
    trace = await gateway.trace(traces[0]["id"])
    assert trace["step_count"] == 4 and trace["violations"] == []
    assert [(i["kind"], i["call_id"]) for i in trace["steps"][3]["input_items"]] == [
        ("tool_result", "call_rome")
    ]


async def test_a_call_compacted_before_its_result_is_owed_after_the_compaction(
    make_gateway: harness.GatewayFactory,
) -> None:
    """Compacted mid-turn: the call's result comes after the compaction item, which holds the
    call; neither request is refused or flagged, even with pairing enforced."""
    gw = await make_gateway(pairing="enforce")
    sdk = client(gw)
    gw.provider.queue(
        reply(
            response(
                [function_call("call_paris", "get_weather", {"city": "Paris"})],
                response_id="resp_1",
            )
        ),
        reply(compacted()),
        reply(response([message("Sunny.")], response_id="resp_3")),
    )
    first = await sdk.responses.create(model="gpt-5", input=QUESTION, tools=TOOLS)
    history = [
        {"role": "user", "content": QUESTION},
        *[item.model_dump(exclude_none=True) for item in first.output],
    ]
    compaction = await sdk.responses.compact(model="gpt-5", input=history)
    going_on = [
        *_going_on(compaction)[:-1],
        {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"},
    ]
    await sdk.responses.create(model="gpt-5", input=going_on, tools=TOOLS)
    assert len(gw.provider.received) == 3
    traces = await gw.traces()
    assert len(traces) == 1
    trace = await gw.trace(traces[0]["id"])
    assert trace["step_count"] == 3 and trace["violations"] == []
    assert trace["status"] == "completed"


async def test_a_step_budget_refuses_the_compaction_in_the_responses_shape(
    gateway: Gateway,
) -> None:
    sdk = client(gateway, **{"X-Loopwatch-Max-Steps": "1"})
    gateway.provider.queue(
        reply(
            response(
                [function_call("call_paris", "get_weather", {"city": "Paris"})],
                response_id="resp_1",
            )
        )
    )
    first = await sdk.responses.create(model="gpt-5", input=QUESTION, tools=TOOLS)
    history: list[Any] = [
        {"role": "user", "content": QUESTION},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"},
    ]
    with pytest.raises(openai.RateLimitError) as raised:
        await sdk.responses.compact(model="gpt-5", input=history)
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["code"] == "step_budget_exceeded"
    assert raised.value.body["message"]
    assert len(gateway.provider.received) == 1


async def test_a_token_budget_adds_no_max_output_tokens(
    make_gateway: harness.GatewayFactory,
) -> None:
    gw = await make_gateway(max_tokens=5000)
    gw.provider.queue(reply(compacted()))
    sdk = client(gw)
    raw = await sdk.responses.with_raw_response.compact(
        model="gpt-5", input=[{"role": "user", "content": QUESTION}]
    )
    assert "x-loopwatch-max-tokens-clamped" not in raw.headers
    assert gw.provider.received[0].body == json.dumps(
        {"model": "gpt-5", "input": [{"role": "user", "content": QUESTION}]}
    ).encode() or set(gw.provider.received[0].json()) == {"model", "input"}
