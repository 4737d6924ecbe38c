"""The recent steps are bounded in bytes: large steps leave room for fewer, the oldest go
first, and a request continuing a forgotten step is threaded through the store."""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
import pytest

from gateway import app as app_module
from gateway.continuation.keys import Boundary, StepRef
from gateway.continuation.recent_steps import RecentSteps
from gateway.items import Item, ItemKind
from tests.factories import chat_request, tool_message, user_message
from tests.fakes.chat import call, completion
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

BUDGET = 256 * 1024


def step(number: int, argument_chars: int) -> StepRef:
    arguments = '{"q": "' + "x" * argument_chars + f'{number}"}}'
    output = (Item(ItemKind.TOOL_CALL, "assistant", None, f"call_{number}", "f", arguments),)
    return StepRef(f"trace{number}", f"step{number}", output)


def fill(recent: RecentSteps, count: int, argument_chars: int) -> list[int]:
    """Remembers `count` steps; the numbers of those still found by their key."""
    for number in range(count):
        recent.remember(f"key{number}", f"resp{number}", step(number, argument_chars), None)
    boundaries = [Boundary(1, f"key{number}") for number in range(count)]
    return [n for n in range(count) if recent.continued(boundaries[n : n + 1]) is not None]


def test_the_newest_steps_are_kept_and_the_oldest_forgotten() -> None:
    recent = RecentSteps(budget=BUDGET)
    kept = fill(recent, 2_000, 100)
    assert 0 < len(kept) < 2_000
    assert kept == list(range(2_000 - len(kept), 2_000))  # the newest, in a row
    newest, oldest = 1_999, 0
    assert recent.last_of(f"trace{newest}") is not None
    assert recent.by_response(f"resp{newest}") is not None
    assert recent.emitters([f"call_{newest}"])
    assert recent.last_of(f"trace{oldest}") is None
    assert recent.by_response(f"resp{oldest}") is None
    assert not recent.emitters([f"call_{oldest}"])


def test_larger_steps_leave_room_for_fewer() -> None:
    small = fill(RecentSteps(budget=BUDGET), 2_000, 100)
    large = fill(RecentSteps(budget=BUDGET), 2_000, 4_000)
    assert 0 < len(large) * 4 < len(small)


def test_claims_and_failed_attempts_are_bounded_too() -> None:
    recent = RecentSteps(budget=BUDGET)
    for number in range(20_000):
        recent.claim(f"step{number}", f"attempt{number}")
        recent.failed(f"failed{number}", StepRef(f"trace{number}", f"step{number}"))
    assert recent.claimed_by("step19999") == "attempt19999"
    assert recent.claimed_by("step0") is None
    assert recent.take_failed("failed19999") is not None
    assert recent.take_failed("failed0") is None


async def test_runs_thread_through_the_store_when_nothing_is_kept_in_memory(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget too small for any step: every continuation is looked up in the store.
    monkeypatch.setattr(app_module, "RecentSteps", functools.partial(RecentSteps, budget=0))
    gateway = await make_gateway()
    gateway.provider.queue(
        *(
            completion(tool_calls=[call(f"call_{run}{i}", "f", {"i": i})], response_id=f"r{run}{i}")
            for i in range(3)
            for run in "ab"
        )
    )
    runs: dict[str, list[dict[str, Any]]] = {
        "a": [user_message("task a")],
        "b": [user_message("task b")],
    }
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            for history in runs.values():
                url = gateway.openai_base + "/chat/completions"
                async with session.post(url, json=chat_request(*history)) as r:
                    message = (await r.json())["choices"][0]["message"]
                history.append(message)
                for tc in message.get("tool_calls") or []:
                    history.append(tool_message(tc["id"], "ok"))
                await gateway.flush()  # stored before it is continued, as it is long before
                # a step falls out of a real budget
    traces = await gateway.traces()
    assert sorted(t["step_count"] for t in traces) == [3, 3]
