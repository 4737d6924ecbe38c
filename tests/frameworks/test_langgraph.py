"""langchain-openai under langgraph's prebuilt ReAct agent through the gateway: Chat
Completions and the Responses API, streamed and not, each run one clean trace."""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("langgraph.prebuilt", reason=NEEDS_EXTRA)

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

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

pytestmark = [
    pytest.mark.frameworks,
    # langgraph 1.x points at langchain's create_agent; its prebuilt agent is what is tested.
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]


@tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return weather_tool(city)


@tool
def get_time(city: str) -> str:
    """The local time of a city."""
    return time_tool(city)


def model(gw: Gateway, api: str, *, stream: bool) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-5" if api == "responses" else "gpt-4.1",
        base_url=gw.openai_base,
        api_key="sk-test-langchain",  # type: ignore[arg-type]
        max_retries=0,
        streaming=stream,
        use_responses_api=api == "responses",
    )


async def run(gw: Gateway, api: str, *, stream: bool) -> str:
    chat = model(gw, api, stream=stream)
    gw.closing(chat.root_async_client)  # the async SDK client the runs use
    agent = create_react_agent(chat, [get_weather, get_time], prompt=INSTRUCTIONS)
    inputs: Any = {"messages": [("user", QUESTION)]}
    if stream:
        state: Any = None
        async for values in agent.astream(inputs, stream_mode="values"):
            state = values
    else:
        state = await agent.ainvoke(inputs)
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    return str(final.text)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_react_agent_run_is_one_clean_trace(
    gateway: Gateway, api: str, stream: bool, steps: int
) -> None:
    answer = await run(gateway, api, stream=stream)
    assert answer == EXPECTED_ANSWER
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol=api, stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS
