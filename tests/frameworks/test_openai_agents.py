"""The OpenAI Agents SDK through the gateway: its default Responses model and its Chat
Completions model, streamed and not, each run one clean trace."""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("agents", reason=NEEDS_EXTRA)

import openai
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)

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


@function_tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return weather_tool(city)


@function_tool
def get_time(city: str) -> str:
    """The local time of a city."""
    return time_tool(city)


def agent(gw: Gateway, api: str) -> Agent:
    client = gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-agents", max_retries=0)
    )
    model: OpenAIResponsesModel | OpenAIChatCompletionsModel
    if api == "responses":
        model = OpenAIResponsesModel(model="gpt-5", openai_client=client)
    else:
        model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
    return Agent(
        name="travel", instructions=INSTRUCTIONS, model=model, tools=[get_weather, get_time]
    )


async def run(gw: Gateway, api: str, *, stream: bool) -> str:
    # Traces of the SDK's own would go to OpenAI's servers: off, as nothing leaves this machine.
    config = RunConfig(tracing_disabled=True)
    if not stream:
        result = await Runner.run(agent(gw, api), QUESTION, run_config=config)
        return str(result.final_output)
    streamed = Runner.run_streamed(agent(gw, api), QUESTION, run_config=config)
    async for _ in streamed.stream_events():
        pass
    return str(streamed.final_output)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, api: str, stream: bool, steps: int
) -> None:
    answer = await run(gateway, api, stream=stream)
    assert answer == EXPECTED_ANSWER
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol=api, stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS
