"""agno through the gateway: its OpenAI Chat model and its OpenAI Responses model, streamed and
not, each run one clean trace."""

from __future__ import annotations

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

pytest.importorskip("agno.models.openai", reason=NEEDS_EXTRA)

import asyncio

import openai
from agno.agent import Agent, RunOutput
from agno.models.openai import OpenAIChat, OpenAIResponses

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


def agent(gw: Gateway, log: ToolLog, api: str) -> Agent:
    client = {"base_url": gw.openai_base, "api_key": "sk-test-agno", "max_retries": 0}
    # The SDK client the model would make, cache and never close: ours, closed with the gateway.
    sdk = gw.closing(openai.AsyncOpenAI(timeout=30, **client))  # type: ignore[arg-type]
    model: OpenAIChat | OpenAIResponses
    if api == "responses":
        model = OpenAIResponses(id="gpt-5", timeout=30, async_client=sdk, **client)
    else:
        model = OpenAIChat(id="gpt-4.1", timeout=30, async_client=sdk, **client)
    # Usage telemetry goes to agno's servers: off here as well as by AGNO_TELEMETRY (conftest).
    return Agent(
        model=model,
        tools=[log.get_weather, log.get_time],
        instructions=INSTRUCTIONS,
        telemetry=False,
    )


async def run(gw: Gateway, log: ToolLog, api: str, *, stream: bool) -> str:
    if not stream:
        output = await agent(gw, log, api).arun(QUESTION)
        return str(output.content)
    final: RunOutput | None = None
    async for event in agent(gw, log, api).arun(QUESTION, stream=True, yield_run_output=True):
        if isinstance(event, RunOutput):
            final = event
    assert final is not None, "the stream ended without the run's output"
    return str(final.content)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_agent_run_is_one_clean_trace(
    gateway: Gateway, api: str, stream: bool, steps: int
) -> None:
    log = ToolLog()
    answer = await asyncio.wait_for(run(gateway, log, api, stream=stream), 60)
    assert answer == EXPECTED_ANSWER
    assert sorted(log.calls) == sorted(EXPECTED_CALLS)
    trace = await assert_one_clean_trace(gateway, steps=steps, protocol=api, stream=stream)
    assert tool_arguments(trace) == EXPECTED_CALLS
    assert await settled_status(gateway, trace["id"]) == "completed"
