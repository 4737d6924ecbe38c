"""pydantic-ai through the gateway: its OpenAI Chat model and its OpenAI Responses model,
streamed and not, each run one clean trace.

On Responses it sends back the ids of earlier reasoning, text and call items only for models
it knows as OpenAI reasoning models, or with `openai_send_reasoning_ids=True`. Otherwise it
echoes earlier reasoning as assistant text ("<think>" … "</think>") and the calls without
their item ids: the history no longer matches what the provider sent, yet it is one run.
"""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("pydantic_ai", reason=NEEDS_EXTRA)

from typing import Any

import openai
from pydantic_ai import Agent, AgentRunResultEvent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.fakes.scripted import bodies
from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    assert_one_clean_trace,
    time_tool,
    tool_arguments,
    weather_tool,
)
from tests.harness import Gateway

pytestmark = [pytest.mark.frameworks]

# A reasoning model pydantic-ai does not know as one of OpenAI's, as behind a compatible server.
UNKNOWN_REASONER = "acme-reasoner-2"
SUMMARY: dict[str, Any] = {"openai_reasoning_summary": "detailed"}
MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("gpt-4.1", {}),
    # A known reasoning model: reasoning, text and call items go back with their ids.
    "responses": ("gpt-5", SUMMARY),
    # The same with item ids turned off: reasoning comes back as <think> text.
    "responses-ids-off": ("gpt-5", {**SUMMARY, "openai_send_reasoning_ids": False}),
    # An unknown model: ids are off by default, so <think> text again.
    "responses-unknown-model": (UNKNOWN_REASONER, SUMMARY),
    "responses-unknown-model-ids-on": (
        UNKNOWN_REASONER,
        {**SUMMARY, "openai_send_reasoning_ids": True},
    ),
}


def get_weather(city: str) -> str:
    """The current weather of a city."""
    return weather_tool(city)


def get_time(city: str) -> str:
    """The local time of a city."""
    return time_tool(city)


def agent(gw: Gateway, mode: str) -> Agent[None, str]:
    name, settings = MODES[mode]
    sdk = openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-pydantic")
    provider = OpenAIProvider(openai_client=gw.closing(sdk))
    model: OpenAIChatModel | OpenAIResponsesModel
    if mode == "chat":
        model = OpenAIChatModel(name, provider=provider)
    else:
        model = OpenAIResponsesModel(name, provider=provider)
    return Agent(
        model,
        instructions=INSTRUCTIONS,
        tools=[get_weather, get_time],
        model_settings=settings,  # type: ignore[arg-type]
    )


async def run(gw: Gateway, mode: str, *, stream: bool) -> str:
    if not stream:
        result = await agent(gw, mode).run(QUESTION)
        return result.output
    output = None
    async with agent(gw, mode).run_stream_events(QUESTION) as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                output = event.result.output
    assert output is not None
    return output


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("mode", list(MODES))
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, mode: str, stream: bool, steps: int
) -> None:
    answer = await run(gateway, mode, stream=stream)
    assert answer == EXPECTED_ANSWER
    protocol = "chat" if mode == "chat" else "responses"
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol=protocol, stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS


async def test_unknown_reasoning_model_echoes_reasoning_as_think_text(gateway: Gateway) -> None:
    """What the unknown-model mode stands for, as pydantic-ai sends it."""
    await run(gateway, "responses-unknown-model", stream=False)
    second = bodies(gateway.provider.received, "/v1/responses")[1]["input"]
    echoed = [i for i in second if i.get("role") == "assistant"]
    assert echoed and str(echoed[0]["content"]).startswith("<think>\n")
    assert not any(i.get("type") == "reasoning" for i in second)
    assert all("id" not in i for i in second if i.get("type") == "function_call")
