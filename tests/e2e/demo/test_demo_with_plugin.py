"""The demo's agents tested as a plugin user tests an agent: through the `loopwatch` fixture,
against the demo's scripted provider, asserting steps and violations."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from gateway.demo.agents import anthropic_run, budget_run, clean_run, looping_run, pairing_run
from gateway.demo.loop import Gateway
from gateway.demo.provider import ScriptedProvider
from gateway.testing.loop_thread import LoopThread
from gateway.testing.served import Served


@pytest.fixture
def demo_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The demo's provider, named as the upstream by the usual settings (the `loopwatch`
    fixture, asked for after this one, reads them), with the demo's pairing and loop checks."""
    thread = LoopThread()
    served = Served(ScriptedProvider().app, gateway=False)
    thread.run(served.start())
    monkeypatch.setenv("LOOPWATCH_UPSTREAM_URL", f"{served.url}/v1")
    monkeypatch.setenv("LOOPWATCH_ANTHROPIC_UPSTREAM_URL", served.url)
    monkeypatch.setenv("LOOPWATCH_PAIRING", "enforce")
    monkeypatch.setenv("LOOPWATCH_LOOPS", "observe")
    monkeypatch.setenv("LOOPWATCH_LOOP_THRESHOLD", "3")
    yield served.url
    thread.run(served.stop())
    thread.close()


@pytest.fixture
async def demo_gateway(demo_provider: str, loopwatch: Any) -> AsyncIterator[Gateway]:
    async with aiohttp.ClientSession() as http:
        yield Gateway(http, loopwatch.url)


async def test_the_clean_run_passes_every_check(demo_gateway: Gateway, loopwatch: Any) -> None:
    run = await clean_run(demo_gateway)

    assert run.outcome == "completed"
    loopwatch.assert_no_violations()
    loopwatch.assert_steps(max=3)
    assert loopwatch.last_trace()["id"] == run.trace_id


async def test_the_lost_tool_result_is_a_violation(demo_gateway: Gateway, loopwatch: Any) -> None:
    run = await pairing_run(demo_gateway)

    assert run.outcome.startswith("400 refused; fixed")
    with pytest.raises(
        AssertionError, match=rf"trace {run.trace_id}: 1 \(missing_tool_result: 1\)"
    ):
        loopwatch.assert_no_violations()


async def test_the_endless_agent_is_held_to_its_budget(
    demo_gateway: Gateway, loopwatch: Any
) -> None:
    run = await budget_run(demo_gateway)

    assert run.outcome == "stopped with 429"
    with pytest.raises(AssertionError, match=rf"trace {run.trace_id} took \d+ steps"):
        loopwatch.assert_steps(max=2)
    assert loopwatch.last_trace()["status"] == "budget_exceeded"


async def test_the_anthropic_agent_through_its_base_url(demo_provider: str, loopwatch: Any) -> None:
    async with aiohttp.ClientSession() as http:
        run = await anthropic_run(Gateway(http, loopwatch.anthropic_base_url))

    assert run.outcome == "completed"
    trace = loopwatch.last_trace()
    assert trace["id"] == run.trace_id
    assert {step["path"] for step in trace["steps"]} == {"/v1/messages"}
    loopwatch.assert_no_violations()


async def test_the_looping_agent_is_caught_repeating_itself(
    demo_gateway: Gateway, loopwatch: Any
) -> None:
    run = await looping_run(demo_gateway)

    with pytest.raises(AssertionError, match=r"repeated_tool_call: \d+"):
        loopwatch.assert_no_violations()
    assert loopwatch.last_trace()["id"] == run.trace_id
