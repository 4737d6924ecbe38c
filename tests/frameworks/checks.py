"""The gateway a framework run goes through, and what a user checks through the read API
afterwards: one clean trace, each tool call paired with its result."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.fakes.script import (
    EXPECTED_ANSWER,
    QUESTION,
    time_tool,
    weather_and_time,
    weather_tool,
)
from tests.fakes.scripted import ScriptedModel
from tests.harness import Gateway, GatewayFactory

__all__ = [
    "EXPECTED_ANSWER",
    "QUESTION",
    "assert_one_clean_trace",
    "scripted_gateway",
    "time_tool",
    "weather_tool",
]


async def scripted_gateway(make: GatewayFactory, *, parallel: bool, **settings: Any) -> Gateway:
    """A gateway (with these settings) whose provider answers from the weather-and-time script."""
    gw = await make(**settings)
    gw.provider.responder = ScriptedModel(weather_and_time(parallel=parallel))
    return gw


NEEDS_EXTRA = "needs the frameworks extra: pip install -e '.[test,frameworks]'"
INSTRUCTIONS = "You are a travel assistant. Use the tools, then answer in one sentence."


def _outline(trace: dict[str, Any]) -> str:
    """A trace in a line per step: what a failing assertion shows."""
    lines = [f"trace {trace['id']}: {trace['step_count']} steps"]
    for step in trace.get("steps", []):
        kinds = [i["kind"] for i in step["input_items"]]
        lines.append(f"  step {step['seq']} {step['stop_reason']}: in {kinds}")
    lines += [f"  violation {v['kind']}: {v['detail']}" for v in trace.get("violations", [])]
    return "\n".join(lines)


async def describe(gw: Gateway) -> str:
    return "\n".join([_outline(await gw.trace(t["id"])) for t in await gw.traces()])


def _calls_and_results(steps: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Each call id with the step that emitted it, each answered call id with the step it was
    answered in."""
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for step in steps:
        for item in step["output_items"]:
            if item["kind"] == "tool_call":
                assert item["call_id"] not in calls, f"call id {item['call_id']} emitted twice"
                calls[item["call_id"]] = step["seq"]
        for item in step["input_items"]:
            if item["kind"] == "tool_result":
                assert item["call_id"] not in results, f"{item['call_id']} answered twice"
                results[item["call_id"]] = step["seq"]
    return calls, results


async def assert_one_clean_trace(
    gw: Gateway, *, steps: int, calls: int = 2, protocol: str, stream: bool
) -> dict[str, Any]:
    """Exactly one trace for the run, with `steps` steps of `protocol`, `calls` tool calls each
    answered by call id in a later step, stop reasons tool_calls … completed, no violation."""
    traces = await gw.traces()
    assert len(traces) == 1, f"{len(traces)} traces:\n{await describe(gw)}"
    trace = await gw.trace(traces[0]["id"])
    outline = _outline(trace)
    assert trace["step_count"] == steps, outline
    assert (trace["violation_count"], trace["violations"]) == (0, []), outline
    ordered = sorted(trace["steps"], key=lambda s: s["seq"])
    stops = [s["stop_reason"] for s in ordered]
    assert stops == ["tool_calls"] * (steps - 1) + ["completed"], outline
    assert {(s["protocol"], s["stream"], s["http_status"]) for s in ordered} == {
        (protocol, stream, 200)
    }, outline
    emitted, answered = _calls_and_results(ordered)
    assert len(emitted) == calls, outline
    assert emitted.keys() == answered.keys(), outline
    assert all(answered[c] > emitted[c] for c in emitted), outline
    return trace


def tool_arguments(trace: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The recorded tool calls as (name, parsed arguments), in order."""
    return [
        (item["tool_name"], json.loads(item["arguments"]))
        for step in sorted(trace["steps"], key=lambda s: s["seq"])
        for item in step["output_items"]
        if item["kind"] == "tool_call"
    ]


EXPECTED_CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})]

# A gateway idle window short enough for a test to see a quiet run settle (rows 5-7 of
# gateway.runs.status): a run ended by a terminal tool is `running` until then.
SHORT_IDLE = {"trace_idle_seconds": 0.5}


async def settled_status(gw: Gateway, trace_id: str, *, within: float = 10.0) -> str:
    """The trace's status once it stops being `running`, or `running` after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        status = str((await gw.trace(trace_id))["status"])
        if status != "running" or asyncio.get_running_loop().time() > deadline:
            return status
        await asyncio.sleep(0.2)


class ToolLog:
    """The tests' tools as plain functions that note each call: proof the tool really ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get_weather(self, city: str) -> str:
        self.calls.append(("get_weather", {"city": city}))
        return weather_tool(city)

    def get_time(self, city: str) -> str:
        self.calls.append(("get_time", {"city": city}))
        return time_tool(city)
