"""The known-keys filter: "no" only once loaded in a sole writer; threading survives restarts."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp
import pytest

from gateway.continuation.keyfilter import KeyFilter
from tests.factories import chat_request
from tests.fakes.chat import call, completion
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite


def test_maybe_until_loaded_then_exact_for_absent_keys() -> None:
    keys = [secrets.token_hex(20) for _ in range(1000)]
    known = KeyFilter(authoritative_when_loaded=True)
    assert all(known.may_hold(k) for k in keys)  # not loaded: every key may be stored
    known.add(keys[0])  # added while loading goes on: kept when the load lands
    known.install(known.build(keys[1:500]))
    assert all(known.may_hold(k) for k in keys[:500])
    absent = sum(known.may_hold(k) for k in keys[500:])
    assert absent <= 5  # a rare false "maybe" costs a lookup, never a lost thread


def test_a_store_with_other_writers_is_always_asked() -> None:
    known = KeyFilter(authoritative_when_loaded=False)
    known.install(known.build([]))
    assert known.may_hold(secrets.token_hex(20))


async def _step(session: aiohttp.ClientSession, base: str, messages: list[Any]) -> dict[str, Any]:
    async with session.post(base + "/chat/completions", json=chat_request(*messages)) as r:
        assert r.status == 200
        message: dict[str, Any] = (await r.json())["choices"][0]["message"]
        return message


async def test_a_run_continues_across_a_gateway_restart(make_gateway: GatewayFactory) -> None:
    first = await make_gateway()
    first.provider.queue(completion(tool_calls=[call("call_1", "f", {})]), completion("done"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    async with aiohttp.ClientSession() as session:
        messages.append(await _step(session, first.openai_base, messages))
        await first.flush()
        second = await make_gateway()  # a new process's memory: only the store knows the run
        for _ in range(100):
            if second.deps.known_keys.authoritative:
                break
            await asyncio.sleep(0.02)
        assert second.deps.known_keys.authoritative
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "ok"})
        await _step(session, second.openai_base, messages)
    traces = await second.traces()
    assert [t["step_count"] for t in traces] == [2]


def test_cached_chain_values_equal_the_uncached_ones() -> None:
    from gateway.continuation.keycache import MAX_ITEM_CHARS, CachedContinuationKeys
    from gateway.continuation.keys import ContinuationKeys
    from gateway.items import Item, ItemKind

    secret = b"s" * 32
    plain, cached = ContinuationKeys(secret), CachedContinuationKeys(secret, capacity=3)
    history = [
        Item(ItemKind.USER, role="user", text="go"),
        Item(ItemKind.TOOL_CALL, role="assistant", call_id="c1", tool_name="f", arguments="{}"),
        Item(ItemKind.TOOL_RESULT, role="tool", call_id="c1", text="x" * (MAX_ITEM_CHARS + 1)),
        Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="done"),
    ]
    for _ in range(3):  # misses, hits, evictions: always the same values
        assert cached.boundaries(history) == plain.boundaries(history)
        assert cached.boundaries(history[:2]) == plain.boundaries(history[:2])
