"""Pairing rules through the gateway with the openai SDK, enforced and observed."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.fakes.chat import call, completion
from tests.fakes.provider import Reply
from tests.harness import Gateway, make_gateway, provider  # noqa: F401

SYSTEM = {"role": "system", "content": "agent"}
ASK = {"role": "user", "content": "weather in Paris and Oslo?"}
CALLS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        call("call_a", "weather", {"city": "Paris"}),
        call("call_b", "weather", {"city": "Oslo"}),
    ],
}


def result(call_id: str, text: str = "sunny") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


BROKEN = {
    "orphan_tool_result": [
        SYSTEM,
        ASK,
        CALLS,
        result("call_a"),
        result("call_b"),
        result("call_zz"),
    ],
    "missing_tool_result": [
        SYSTEM,
        ASK,
        CALLS,
        result("call_a"),
        {"role": "user", "content": "and?"},
    ],
    "duplicate_call_id": [
        SYSTEM,
        ASK,
        {
            **CALLS,
            "tool_calls": [
                call("call_a", "weather", {"city": "Paris"}),
                call("call_a", "weather", {"city": "Oslo"}),
            ],
        },
        result("call_a"),
        result("call_a"),
    ],
}
BROKEN_CALL = {
    "orphan_tool_result": "call_zz",
    "missing_tool_result": "call_b",
    "duplicate_call_id": "call_a",
}


def sdk(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test", max_retries=2))


@pytest.mark.parametrize("rule", sorted(BROKEN))
async def test_enforce_refuses_before_the_provider(make_gateway, rule: str) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway()
    async with sdk(gw) as client:
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(model="gpt-4o", messages=BROKEN[rule])
    error = raised.value.body
    assert error["code"] == rule
    assert rule in error["message"] and BROKEN_CALL[rule] in error["message"]
    assert gw.provider.received == []  # the broken history never reached the provider
    trace = (await gw.traces(violation=rule))[0]
    detail = await gw.trace(trace["id"])
    enforced = [v for v in detail["violations"] if v["enforced"]]
    assert [(v["kind"], v["call_id"]) for v in enforced] == [(rule, BROKEN_CALL[rule])]
    assert detail["step_count"] == 0  # refusals are violations, not steps


@pytest.mark.parametrize("rule", sorted(BROKEN))
async def test_observe_forwards_and_records(make_gateway, rule: str) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(pairing="observe")
    gw.provider.queue(completion("forwarded"))
    async with sdk(gw) as client:
        answer = await client.chat.completions.create(model="gpt-4o", messages=BROKEN[rule])
    assert answer.choices[0].message.content == "forwarded"
    assert len(gw.provider.received) == 1
    trace = (await gw.traces(violation=rule))[0]
    detail = await gw.trace(trace["id"])
    found = [v for v in detail["violations"] if v["kind"] == rule]
    assert found and not any(v["enforced"] for v in found)
    assert found[0]["step_id"] == detail["steps"][0]["id"]
    assert BROKEN_CALL[rule] in found[0]["detail"]


async def test_rewritten_assistant_turn_is_flagged_across_steps(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway(pairing="observe")
    gw.provider.queue(
        completion(tool_calls=[call("call_real", "weather", {"city": "Paris"})]),
        completion("done"),
    )
    trace_header = {"X-Loopwatch-Trace-Id": "rewritten"}
    async with sdk(gw) as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[SYSTEM, ASK], extra_headers=trace_header
        )
        # The client forgets the recorded call and invents another one with its result.
        invented = {**CALLS, "tool_calls": [call("call_fake", "weather", {"city": "Paris"})]}
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[SYSTEM, ASK, invented, result("call_fake")],
            extra_headers=trace_header,
        )
    trace = await gw.trace("rewritten")
    missing = [v for v in trace["violations"] if v["kind"] == "missing_tool_result"]
    assert [v["call_id"] for v in missing] == ["call_real"]
    assert missing[0]["step_id"] == trace["steps"][1]["id"]


async def test_clean_parallel_history_passes(make_gateway) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway()
    gw.provider.queue(completion("ok"))
    swapped = [SYSTEM, ASK, CALLS, result("call_b", "rain"), result("call_a")]  # by id, not order
    async with sdk(gw) as client:
        await client.chat.completions.create(model="gpt-4o", messages=swapped)
    assert len(gw.provider.received) == 1
    assert (await gw.traces())[0]["violation_count"] == 0


def two_choices() -> Reply:
    """`n=2`, a tool call in each choice (openai.types.chat.ChatCompletion, `choices[i].index`)."""
    body = completion(tool_calls=[call("call_c0", "weather", {"city": "Paris"})]).body
    second = {
        **body["choices"][0],
        "index": 1,
        "message": {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [call("call_c1", "weather", {"city": "Oslo"})],
        },
    }
    return Reply(body={**body, "choices": [body["choices"][0], second]})


@pytest.mark.parametrize("kept", [0, 1])
async def test_n_choices_expect_results_only_for_the_choice_kept(make_gateway, kept: int) -> None:  # type: ignore[no-untyped-def]
    gw: Gateway = await make_gateway()
    gw.provider.queue(two_choices(), completion("Paris it is."))
    tools: Any = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    async with sdk(gw) as client:
        first = await client.chat.completions.create(
            model="gpt-4o", messages=[SYSTEM, ASK], n=2, tools=tools
        )
        chosen = first.choices[kept].message
        echo = chosen.model_dump(exclude_none=True)
        call_id = chosen.tool_calls[0].id  # type: ignore[index]
        await client.chat.completions.create(
            model="gpt-4o", messages=[SYSTEM, ASK, echo, result(call_id)], tools=tools
        )
    (trace,) = await gw.traces()
    detail = await gw.trace(trace["id"])
    outputs = detail["steps"][0]["output_items"]
    assert [(i["call_id"], i["attrs"].get("choice", 0)) for i in outputs] == [
        ("call_c0", 0),
        ("call_c1", 1),
    ]
    assert [i["call_id"] for i in detail["steps"][1]["input_items"]] == [call_id]
    assert detail["violations"] == [] and detail["status"] == "completed"
