"""smolagents' ToolCallingAgent through the gateway with its OpenAI-compatible model, streamed
and not: one trace per run, ended by its `final_answer` tool.

It re-renders the whole history each step: earlier calls come back as assistant text
("Calling tools: [...]") and their results as a user message ("Observation: ..."), never as
tool messages, so no call is answered by id. The run ends when the model calls the declared
`final_answer` tool, whose result is never sent: a terminal tool.
"""

from __future__ import annotations

import os

import pytest

from tests.frameworks.checks import NEEDS_EXTRA

# smolagents has no telemetry of its own; huggingface_hub, which it imports, reads these at
# import: no hub request and no hub telemetry from this process.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
pytest.importorskip("smolagents", reason=NEEDS_EXTRA)

import asyncio

from smolagents import OpenAIModel, Tool, ToolCallingAgent, tool

from tests.frameworks.checks import (
    EXPECTED_ANSWER,
    EXPECTED_CALLS,
    INSTRUCTIONS,
    QUESTION,
    SHORT_IDLE,
    ToolLog,
    describe,
    scripted_gateway,
    settled_status,
    tool_arguments,
)
from tests.harness import Gateway, GatewayFactory

pytestmark = pytest.mark.frameworks


def tools(log: ToolLog) -> list[Tool]:
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

    return [get_weather, get_time]


def run(gw: Gateway, log: ToolLog, *, stream: bool) -> str:
    model = OpenAIModel(
        model_id="gpt-4.1",
        api_base=gw.openai_base,
        api_key="sk-test-smolagents",
        client_kwargs={"max_retries": 0, "timeout": 30},
    )
    agent = ToolCallingAgent(
        tools=tools(log),
        model=model,
        instructions=INSTRUCTIONS,
        stream_outputs=stream,
        max_steps=6,
        verbosity_level=0,
    )
    return str(agent.run(QUESTION))


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, parallel: bool) -> Gateway:
    return await scripted_gateway(make_gateway, parallel=parallel, **SHORT_IDLE)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_tool_calling_agent_run_is_one_trace(
    gateway: Gateway, stream: bool, steps: int
) -> None:
    log = ToolLog()
    # The agent is synchronous: it runs in a thread while the gateway serves on this loop.
    answer = await asyncio.wait_for(asyncio.to_thread(run, gateway, log, stream=stream), 60)
    assert answer == EXPECTED_ANSWER
    assert sorted(log.calls) == sorted(EXPECTED_CALLS)
    traces = await gateway.traces()
    assert len(traces) == 1, f"{len(traces)} traces:\n{await describe(gateway)}"
    trace = await gateway.trace(traces[0]["id"])
    outline = await describe(gateway)
    # A turn per round of tool calls, then the answer: a turn that calls final_answer.
    assert trace["step_count"] == steps, outline
    assert (trace["violation_count"], trace["violations"]) == (0, []), outline
    ordered = sorted(trace["steps"], key=lambda s: s["seq"])
    assert [s["stop_reason"] for s in ordered] == ["tool_calls"] * steps, outline
    assert {(s["protocol"], s["stream"], s["http_status"]) for s in ordered} == {
        ("chat", stream, 200)
    }, outline
    assert tool_arguments(trace) == [*EXPECTED_CALLS, ("final_answer", {"answer": answer})]
    assert await settled_status(gateway, trace["id"]) == "completed", outline
