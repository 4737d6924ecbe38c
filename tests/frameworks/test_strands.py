"""strands-agents through the gateway with its OpenAI model provider (Chat Completions),
streamed (its default) and not: each run one clean trace."""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("strands.models.openai", reason=NEEDS_EXTRA)

import asyncio
from typing import Any

from strands import Agent, tool
from strands.models.openai import OpenAIModel

from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    ToolLog,
    assert_one_clean_trace,
    settled_status,
    tool_arguments,
)
from tests.harness import Gateway

pytestmark = [pytest.mark.frameworks]


def agent(gw: Gateway, log: ToolLog, *, stream: bool) -> Agent:
    @tool
    def get_weather(city: str) -> str:
        """The current weather of a city.

        Args:
            city: The city's name.
        """
        return log.get_weather(city)

    @tool
    def get_time(city: str) -> str:
        """The local time of a city.

        Args:
            city: The city's name.
        """
        return log.get_time(city)

    client: dict[str, Any] = {
        "base_url": gw.openai_base,
        "api_key": "sk-test-strands",
        "max_retries": 0,
        "timeout": 30,
    }
    model = OpenAIModel(client_args=client, model_id="gpt-4.1", stream=stream)
    # No callback handler: the default one prints the streamed text.
    return Agent(
        model=model,
        tools=[get_weather, get_time],
        system_prompt=INSTRUCTIONS,
        callback_handler=None,
    )


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
async def test_agent_run_is_one_clean_trace(gateway: Gateway, stream: bool, steps: int) -> None:
    log = ToolLog()
    result = await asyncio.wait_for(agent(gateway, log, stream=stream).invoke_async(QUESTION), 60)
    assert str(result).strip() == EXPECTED_ANSWER
    assert sorted(log.calls) == sorted(EXPECTED_CALLS)
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol="chat", stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS
    assert await settled_status(gateway, trace["id"]) == "completed"
