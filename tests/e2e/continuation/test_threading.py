"""Trace threading: continuation keys over typed items, and agent runs through the gateway."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiohttp
import pytest

from gateway.continuation.keys import ContinuationKeys
from gateway.items import Item, ItemKind
from gateway.protocols.openai_chat.completions import ADAPTER
from tests.factories import chat_request, tool_message, user_message
from tests.fakes.chat import call, completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

KEYS = ContinuationKeys(b"k" * 32)


def items(messages: list[dict[str, Any]]) -> list[Item]:
    return ADAPTER.parse_request(chat_request(*messages, model="m")).items


def test_echoed_turn_matches_the_step_key_despite_sdk_variations() -> None:
    request = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    _, state = KEYS.boundaries(items(request))
    output = [
        Item(
            ItemKind.TOOL_CALL,
            role="assistant",
            call_id="c1",
            tool_name="f",
            arguments='{"a": 1, "b": 2}',
        )
    ]
    key = KEYS.step_key(state, output)
    echoes = [
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "f", '{"a": 1, "b": 2}')]},
        {
            "role": "assistant",
            "content": "",
            "refusal": None,
            "annotations": [],
            "tool_calls": [call("c1", "f", '{"b":2,"a":1}')],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "hidden",
            "tool_calls": [call("c1", "f", '{"a":1,"b":2}')],
        },
    ]
    for echo in echoes:
        history = [*request, echo, {"role": "tool", "tool_call_id": "c1", "content": "r"}]
        parsed = items(history)
        boundaries, _ = KEYS.boundaries(parsed)
        assert [b.key for b in boundaries] == [key], echo
        new = parsed[boundaries[0].position :]
        assert [i.kind for i in new] == [ItemKind.TOOL_RESULT]  # only the result is new


def test_a_different_history_does_not_match() -> None:
    base = [{"role": "user", "content": "u"}]
    _, state = KEYS.boundaries(items(base))
    key = KEYS.step_key(state, [Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="hello")])
    other = [{"role": "user", "content": "u2"}, {"role": "assistant", "content": "hello"}]
    assert key not in [b.key for b in KEYS.boundaries(items(other))[0]]
    edited = [*base, {"role": "assistant", "content": "hello!"}]
    assert key not in [b.key for b in KEYS.boundaries(items(edited))[0]]


def test_keys_depend_on_the_install_secret() -> None:
    history = items([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}])
    ours = KEYS.boundaries(history)[0][0].key
    theirs = ContinuationKeys(b"x" * 32).boundaries(history)[0][0].key
    assert ours != theirs


async def test_long_run_stores_each_message_once(gateway: Gateway, database_url: str) -> None:
    steps = 100
    gateway.provider.queue(
        *(
            completion(tool_calls=[call(f"call_{i}", "step", {"i": i})], response_id=f"r{i}")
            for i in range(steps - 1)
        ),
        completion("done", response_id="last"),
    )
    messages: list[dict[str, Any]] = [user_message("go")]
    async with aiohttp.ClientSession() as session:
        for _ in range(steps):
            async with session.post(
                gateway.openai_base + "/chat/completions",
                json=chat_request(*messages),
            ) as r:
                message = (await r.json())["choices"][0]["message"]
            messages.append(message)
            for tc in message.get("tool_calls") or []:
                messages.append(tool_message(tc["id"], "ok"))
    traces = await gateway.traces()
    assert len(traces) == 1 and traces[0]["step_count"] == steps
    path = database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        inputs = db.execute("SELECT count(*) FROM items WHERE direction = 'input'").fetchone()[0]
        outputs = db.execute("SELECT count(*) FROM items WHERE direction = 'output'").fetchone()[0]
    # 1 user message + 99 tool results in, 100 answers out: linear, not quadratic.
    assert (inputs, outputs) == (steps, steps)


async def test_two_runs_with_different_openings_stay_apart(gateway: Gateway) -> None:
    gateway.provider.queue(completion("A1"), completion("B1"), completion("A2"), completion("B2"))
    runs: dict[str, list[dict[str, Any]]] = {
        "a": [user_message("task a")],
        "b": [user_message("task b")],
    }
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            for history in runs.values():
                async with session.post(
                    gateway.openai_base + "/chat/completions",
                    json=chat_request(*history),
                ) as r:
                    history.append((await r.json())["choices"][0]["message"])
                history.append(user_message("continue"))
    traces = await gateway.traces()
    assert sorted(t["step_count"] for t in traces) == [2, 2]
