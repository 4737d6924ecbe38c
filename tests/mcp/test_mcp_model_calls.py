"""The model's recent tool calls, which MCP executions are joined to, are bounded in bytes:
long arguments leave room for fewer calls, the oldest go first, and what is left joins."""

from __future__ import annotations

from gateway.items import Item, ItemKind
from gateway.mcp.joining import ModelCalls

BUDGET = 256 * 1024


def tool_call(number: int, argument_chars: int) -> Item:
    arguments = '{"path": "/' + "a" * argument_chars + f'{number}"}}'
    return Item(ItemKind.TOOL_CALL, "assistant", None, f"call_{number}", "fs__read", arguments)


def fill(calls: ModelCalls, count: int, argument_chars: int) -> list[int]:
    """Adds one call a step; the numbers of the calls still known."""
    for number in range(count):
        calls.add(f"trace{number}", [tool_call(number, argument_chars)], now=float(number))
    return [n for n in range(count) if calls.by_call_id(f"call_{n}") is not None]


def test_the_newest_calls_are_kept_and_still_join() -> None:
    calls = ModelCalls(window=1e9, budget=BUDGET)
    kept = fill(calls, 5_000, 50)
    assert 0 < len(kept) < 5_000
    assert kept == list(range(5_000 - len(kept), 5_000))
    newest = tool_call(4_999, 50).arguments
    found = calls.candidates("read", newest, now=5_000.0)
    assert [c.call_id for c in found] == ["call_4999"]
    oldest = tool_call(0, 50).arguments
    assert calls.candidates("read", oldest, now=5_000.0) == []


def test_long_arguments_leave_room_for_fewer_calls() -> None:
    short = fill(ModelCalls(window=1e9, budget=BUDGET), 5_000, 50)
    long = fill(ModelCalls(window=1e9, budget=BUDGET), 5_000, 5_000)
    assert 0 < len(long) * 10 < len(short)
