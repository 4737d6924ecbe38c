"""Usage is what is billed, through a real gateway and the official anthropic SDK: the
provider's iterations summed (compaction, a fallback model), its web searches counted and
priced, the model that answered recorded with the one asked for, a refusal's category kept,
and a token budget counting what the step records; streamed and not.

Usage shapes: anthropic 2.17 types/beta/beta_usage.py, beta_iterations_usage.py,
beta_server_tool_usage.py, beta_refusal_stop_details.py, beta_fallback_block.py.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import anthropic
import genai_prices
import pytest

from tests import harness
from tests.fakes.anthropic import message, reply, streamed, text
from tests.fakes.provider import Reply
from tests.harness import Gateway

provider = harness.provider

pytestmark = pytest.mark.sqlite
make_gateway, gateway = harness.make_gateway, harness.gateway

OPUS, SONNET = "claude-opus-4-1", "claude-sonnet-4-5"
QUESTION = [{"role": "user", "content": "What did the ESA announce this week?"}]
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}


def answer(body: dict[str, Any], stream: bool) -> Reply:
    return streamed(body) if stream else reply(body)


def sdk(gw: Gateway, **headers: str) -> anthropic.AsyncAnthropic:
    client = anthropic.AsyncAnthropic(
        base_url=gw.url, api_key="sk-ant-test", max_retries=0, default_headers=headers
    )
    return gw.closing(client)


async def ask(client: anthropic.AsyncAnthropic, stream: bool, model: str, **params: Any) -> Any:
    if stream:
        async with client.messages.stream(
            model=model, max_tokens=2048, messages=QUESTION, **params
        ) as events:
            return await events.get_final_message()
    return await client.messages.create(model=model, max_tokens=2048, messages=QUESTION, **params)


async def only_step(gw: Gateway) -> dict[str, Any]:
    (listed,) = await gw.traces()
    (step,) = (await gw.trace(listed["id"]))["steps"]
    return step


def library(model: str, **usage: int) -> Decimal:
    found = genai_prices.calc_price(genai_prices.Usage(**usage), model, provider_id="anthropic")
    return found.total_price


def compacted(tokens: int = 180_000) -> dict[str, Any]:
    """A turn compacted before it answered, with two web searches; the top-level counts
    leave the compaction's out, as Anthropic's compaction example shows."""
    return message(
        [text("Based on our conversation and two searches: a probe, on Tuesday.")],
        use={
            "input_tokens": 23_000,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1_000,
            "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
            "iterations": [
                {"type": "compaction", "input_tokens": tokens, "output_tokens": 3_500,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                {"type": "message", "input_tokens": 23_000, "output_tokens": 1_000,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            ],
        },
    )  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_compacted_turn_with_web_searches_is_recorded_and_priced_whole(
    gateway: Gateway, stream: bool
) -> None:
    gateway.provider.queue(answer({**compacted(), "model": SONNET}, stream))
    final = await ask(sdk(gateway), stream, SONNET, tools=[WEB_SEARCH])
    assert final.usage.input_tokens == 23_000  # the client sees the provider's answer as sent

    step = await only_step(gateway)
    assert step["model"] == SONNET
    assert step["usage"]["prompt_tokens"] == 203_000
    assert step["usage"]["completion_tokens"] == 4_500
    assert step["usage"]["total_tokens"] == 207_500
    versions = {"api_versions": {"anthropic-version": anthropic_version()}}
    assert step["attrs"] == {
        "iterations": 2,
        "server_tool_requests": {"web_search": 2},
        **versions,
    }
    # Tokens at Sonnet 4.5's price (past 200k input: its long-context tier) and two searches.
    expected = library(SONNET, input_tokens=203_000, output_tokens=4_500, web_searches=2)
    assert step["cost_usd"] == pytest.approx(float(expected))
    assert step["cost_source"] == "genai-prices"


def fallback_served(model_field: str) -> dict[str, Any]:
    """Opus declined and Sonnet served the turn, its cache writes kept an hour."""
    body = message(
        [
            {"type": "fallback", "from": {"model": OPUS}, "to": {"model": SONNET},
             "trigger": {"type": "refusal"}},
            text("Here is the summary you asked for."),
        ],
        use={
            "input_tokens": 1_540,
            "cache_creation_input_tokens": 2_000,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2_000},
            "output_tokens": 160,
            "iterations": [
                {"type": "message", "model": OPUS, "input_tokens": 20, "output_tokens": 12,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 2_000,
                 "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                    "ephemeral_1h_input_tokens": 2_000}},
                {"type": "fallback_message", "model": SONNET, "input_tokens": 1_520,
                 "output_tokens": 148, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0},
            ],
        },
    )  # fmt: skip
    return {**body, "model": model_field}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_turn_a_fallback_model_served_is_its_step_each_model_at_its_price(
    gateway: Gateway, stream: bool
) -> None:
    gateway.provider.queue(answer(fallback_served(OPUS), stream))
    await ask(sdk(gateway), stream, OPUS)

    step = await only_step(gateway)
    assert step["model"] == SONNET  # the model that answered
    assert step["attrs"]["requested_model"] == OPUS
    assert step["attrs"]["iterations"] == 2
    assert step["attrs"]["cache_write_1h_tokens"] == 2_000
    assert set(step["attrs"]["usage_by_model"]) == {OPUS, SONNET}
    assert step["usage"]["prompt_tokens"] == 3_540
    assert step["usage"]["cache_creation_tokens"] == 2_000
    opus = library(
        OPUS, input_tokens=2_020, cache_write_tokens=2_000, cache_write_1h_tokens=2_000,
        output_tokens=12,
    )  # fmt: skip
    sonnet = library(SONNET, input_tokens=1_520, output_tokens=148)
    assert step["cost_usd"] == pytest.approx(float(opus + sonnet))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_refusal_keeps_its_category(gateway: Gateway, stream: bool) -> None:
    refused = {
        **message([text("I can help with the first part, but ")], stop_reason="refusal"),
        "model": SONNET,
        "stop_details": {"type": "refusal", "category": "cyber", "explanation": None},
    }
    gateway.provider.queue(answer(refused, stream))
    await ask(sdk(gateway), stream, SONNET)

    step = await only_step(gateway)
    assert (step["stop_reason"], step["raw_stop_reason"]) == ("refusal", "refusal")
    versions = {"api_versions": {"anthropic-version": anthropic_version()}}
    assert step["attrs"] == {"refusal_category": "cyber", **versions}
    trace = (await gateway.traces())[0]
    assert trace["status"] == "completed"  # a refusal is the model's final answer


async def test_a_token_budget_counts_the_iterations_the_step_records(make_gateway: Any) -> None:
    gw = await make_gateway(max_tokens=208_500)
    gw.provider.queue(reply({**compacted(), "model": SONNET}), reply(message([text("Tuesday.")])))
    client = sdk(gw, **{"X-Loopwatch-Trace-Id": "compacted-run"})
    await ask(client, False, SONNET)
    await ask(client, False, SONNET)
    # 207,500 spent by the compacted turn, not the top level's 24,000: 1,000 remain.
    assert gw.provider.received[1].json()["max_tokens"] == 1_000
    trace = await gw.trace("compacted-run")
    assert trace["usage"]["total_tokens"] == 207_500 + 30
    assert trace["steps"][0]["usage"]["total_tokens"] == 207_500


async def test_a_cost_budget_counts_the_web_searches_at_their_configured_price(
    make_gateway: Any,
) -> None:
    prices = {"claude-*": {"input": 1, "output": 10, "server_tool_requests": {"web_search": 0.5}}}
    gw = await make_gateway(prices=prices)
    searched = message(
        [text("Two searches later: a probe, on Tuesday.")],
        use={
            "input_tokens": 100_000,
            "output_tokens": 10_000,
            "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
        },
    )
    gw.provider.queue(reply({**searched, "model": SONNET}), reply(message([text("Tuesday.")])))
    headers = {"X-Loopwatch-Trace-Id": "searched-run", "X-Loopwatch-Max-Cost-Usd": "1.21"}
    client = sdk(gw, **headers)
    await ask(client, False, SONNET, tools=[WEB_SEARCH])
    # $0.10 in + $0.10 out + 2 searches x $0.50 = $1.20 spent: $0.01 buys 1,000 tokens at $10/M.
    await ask(client, False, SONNET, tools=[WEB_SEARCH])
    assert gw.provider.received[1].json()["max_tokens"] == 1_000
    step = (await gw.trace("searched-run"))["steps"][0]
    assert (step["cost_usd"], step["cost_source"]) == (pytest.approx(1.2), "config")


def anthropic_version() -> str:
    """The API version the anthropic SDK sends: recorded with each step (cassettes)."""
    return anthropic.AsyncAnthropic(api_key="k").default_headers["anthropic-version"]
