"""The known-keys filter: "no" only once loaded in a sole writer; threading survives restarts."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp
import pytest

from gateway.continuation.keyfilter import BuiltKeys, KeyFilter
from tests.factories import chat_request
from tests.fakes.chat import call, completion
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite


def test_maybe_until_loaded_then_exact_for_absent_keys() -> None:
    keys = [secrets.token_hex(20) for _ in range(1000)]
    known = KeyFilter(authoritative_when_loaded=True)
    assert all(known.may_hold(k) for k in keys)  # not loaded: every key may be stored
    known.add(keys[0])  # added while loading goes on: kept when the load lands
    known.install(_built(keys[1:500]))
    assert all(known.may_hold(k) for k in keys[:500])
    absent = sum(known.may_hold(k) for k in keys[500:])
    assert absent <= 5  # a rare false "maybe" costs a lookup, never a lost thread


def _built(keys: list[str], expected: int = 0) -> BuiltKeys:
    built = BuiltKeys(expected)
    built.add_all(keys)
    return built


def _false_maybes(known: KeyFilter | BuiltKeys, tries: int = 20_000) -> float:
    if isinstance(known, BuiltKeys):
        layers = known.layers
        return (
            sum(any(layer.holds(secrets.token_hex(16)) for layer in layers) for _ in range(tries))
            / tries
        )
    return sum(known.may_hold(secrets.token_hex(16)) for _ in range(tries)) / tries


def test_sized_to_the_store_under_one_percent_false_maybe_with_room_to_grow() -> None:
    stored = [secrets.token_hex(16) for _ in range(100_000)]
    known = KeyFilter(authoritative_when_loaded=True)
    built = _built(stored, expected=len(stored))
    assert len(built.layers) == 1  # sized for the store: one layer holds it
    known.install(built)
    assert all(known.may_hold(k) for k in stored)
    assert _false_maybes(known) <= 0.01
    for _ in range(len(stored)):  # the store doubles while the gateway runs
        known.add(secrets.token_hex(16))
    assert _false_maybes(known) <= 0.01  # a larger layer took the new keys
    assert all(known.may_hold(k) for k in stored)


def test_a_filter_sized_too_small_grows_instead_of_saturating() -> None:
    built = BuiltKeys(expected=0)
    keys = [secrets.token_hex(16) for _ in range(400_000)]
    built.add_all(keys)
    assert len(built.layers) > 1
    assert _false_maybes(built) <= 0.01


def test_a_store_with_other_writers_is_always_asked() -> None:
    known = KeyFilter(authoritative_when_loaded=False)
    known.install(_built([]))
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
    plain, cached = ContinuationKeys(secret), CachedContinuationKeys(secret, budget=1200)
    history = [
        Item(ItemKind.USER, role="user", text="go"),
        Item(ItemKind.TOOL_CALL, role="assistant", call_id="c1", tool_name="f", arguments="{}"),
        Item(ItemKind.TOOL_RESULT, role="tool", call_id="c1", text="x" * (MAX_ITEM_CHARS + 1)),
        Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="done"),
    ]
    for _ in range(3):  # misses, hits, evictions: always the same values
        assert cached.boundaries(history) == plain.boundaries(history)
        assert cached.boundaries(history[:2]) == plain.boundaries(history[:2])


async def test_keys_of_old_traces_are_known_after_a_restart(
    make_gateway: GatewayFactory, database_url: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from gateway.continuation.keys import call_filter_key
    from gateway.items import Item, ItemKind
    from gateway.step import StepRecord
    from gateway.store.engine import create_schema, make_engine
    from gateway.store.write.writer import StoreWriter

    old = datetime.now(UTC) - timedelta(days=40)
    steps = [
        StepRecord(
            id=f"st-old-{n}",
            trace_id=f"tr-old-{n % 7}",
            protocol="chat",
            method="POST",
            path="/v1/chat/completions",
            started_at=old + timedelta(minutes=n),
            continuation_key=secrets.token_hex(16),
            output_items=[Item(ItemKind.TOOL_CALL, call_id=f"call_old_{n}", tool_name="f")],
        )
        for n in range(300)
    ]
    engine = make_engine(database_url)
    create_schema(engine)
    StoreWriter(engine).write_batch(steps)
    engine.dispose()
    known = (await make_gateway()).deps.known_keys
    for _ in range(200):
        if known.authoritative:
            break
        await asyncio.sleep(0.02)
    assert known.authoritative
    assert all(known.may_hold(s.continuation_key or "") for s in steps)
    assert all(known.may_hold(call_filter_key(f"call_old_{n}")) for n in range(300))
    assert not any(known.may_hold(call_filter_key(f"call_new_{n}")) for n in range(300))
