"""Cost and time budgets through the gateway with the official openai SDK: refused before the
provider with 429 and `x-should-retry: false`, the completion limit clamped to what the
remaining dollars buy, a header that does not parse answered with a 400 naming it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from tests.fakes.chat import completion, usage
from tests.harness import Gateway, make_gateway, provider  # noqa: F401

HELLO: Any = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def sdk(gw: Gateway, **headers: str) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(
            base_url=gw.openai_base, api_key="sk-test", max_retries=3, default_headers=headers
        )
    )


async def test_cost_budget_clamps_then_refuses(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    # gpt-4o-mini: $0.15 / $0.60 per million input / output tokens.
    big = usage(prompt=100_000, completion=50_000)  # $0.015 + $0.03
    mini = "gpt-4o-mini"  # the model that answers is what a step is priced as
    gw.provider.queue(
        completion("one", use=big, model=mini), completion("two", use=big, model=mini)
    )
    client = sdk(gw, **{"X-Loopwatch-Trace-Id": "costly", "X-Loopwatch-Max-Cost-Usd": "0.05"})
    first = await client.chat.completions.with_raw_response.create(**HELLO, max_tokens=500_000)
    # $0.05 buys 83,333 output tokens at $0.60 per million: the limit sent is clamped to it.
    sent = json.loads(gw.provider.received[0].body)
    assert sent["max_tokens"] == 83_333
    assert first.headers["x-loopwatch-cost-remaining-usd"] == "0.000000"  # all of it held
    await client.chat.completions.create(**HELLO)  # $0.045 spent: $0.005 left, still > 1 token
    with pytest.raises(openai.RateLimitError) as raised:
        await client.chat.completions.create(**HELLO)
    assert raised.value.body["code"] == "cost_budget_exceeded"  # type: ignore[index]
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(gw.provider.received) == 2  # refused before the provider, not retried
    trace = await gw.trace("costly")
    assert trace["status"] == "budget_exceeded"
    assert trace["cost_usd"] == pytest.approx(0.09)
    assert [s["cost_source"] for s in trace["steps"]] == ["genai-prices", "genai-prices"]


async def test_time_budget_refuses_after_the_wall_clock_runs_out(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    gw.provider.queue(completion("quick"), completion("late"))
    client = sdk(gw, **{"X-Loopwatch-Trace-Id": "timed", "X-Loopwatch-Max-Duration-S": "0.5"})
    await client.chat.completions.create(**HELLO)
    await asyncio.sleep(0.6)  # the run's wall clock passes its budget
    with pytest.raises(openai.RateLimitError) as raised:
        await client.chat.completions.create(**HELLO)
    assert raised.value.body["code"] == "time_budget_exceeded"  # type: ignore[index]
    assert len(gw.provider.received) == 1


@pytest.mark.parametrize(
    "header", ["X-Loopwatch-Max-Cost-Usd", "X-Loopwatch-Max-Duration-S"], ids=["cost", "time"]
)
async def test_a_budget_header_that_does_not_parse_is_a_400_naming_it(
    make_gateway: Any, header: str
) -> None:
    gw: Gateway = await make_gateway()
    with pytest.raises(openai.BadRequestError) as raised:
        await sdk(gw, **{header: "lots"}).chat.completions.create(**HELLO)
    assert header in str(raised.value)
    assert gw.provider.received == []
    # Refused, and recorded: the trace the answer names holds the violation.
    await gw.deps.recorder.flush(timeout=10)
    trace = await gw.trace(raised.value.response.headers["X-Loopwatch-Trace-Id"])
    assert [v["kind"] for v in trace["violations"]] == ["invalid_request"]
    assert trace["status"] == "refused"
