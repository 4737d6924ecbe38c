"""The byte-bounded map every in-memory index and cache of the gateway is kept in."""

from __future__ import annotations

from gateway.memory import ENTRY, ByteLru


def by_length(key: str, value: str) -> int:
    return len(value)


def test_the_oldest_entries_go_first_once_over_budget() -> None:
    lru = ByteLru[str, str](3 * (ENTRY + 100), by_length)
    for key in "abcd":
        lru.put(key, "x" * 100)
    assert list(lru) == ["b", "c", "d"]
    assert lru.get("a") is None and lru.get("d") == "x" * 100
    assert lru.held <= lru.budget


def test_few_large_entries_or_many_small_ones_fit_the_same_budget() -> None:
    lru = ByteLru[str, str](10_000, by_length)
    for number in range(100):
        lru.put(f"small{number}", "s")
    assert len(lru) == 10_000 // (ENTRY + 1)
    lru.put("large", "L" * 5_000)
    assert lru.get("large") is not None
    assert len(lru) < 10_000 // (ENTRY + 1) and lru.held <= lru.budget


def test_a_replaced_or_touched_entry_is_the_newest() -> None:
    lru = ByteLru[str, str](3 * (ENTRY + 10), by_length)
    lru.put("a", "1" * 10)
    lru.put("b", "2" * 10)
    lru.put("a", "3" * 10)  # replaced: charged once
    lru.put("c", "4" * 10)
    lru.touch("b")
    lru.put("d", "5" * 10)
    assert list(lru) == ["c", "b", "d"]
    assert lru.held == 3 * (ENTRY + 10)


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    lru = ByteLru[str, str](1_000, by_length)
    lru.put("a", "x")
    lru.put("b", "y")
    lru.put("b", "y" * 2_000)  # no stale value either
    lru.put("huge", "x" * 2_000)
    assert list(lru) == ["a"] and lru.held == ENTRY + 1


def test_popped_entries_give_their_bytes_back() -> None:
    lru = ByteLru[str, str](10_000, by_length)
    lru.put("a", "x" * 50, size=500)
    assert lru.held == ENTRY + 500
    assert lru.pop("a") == "x" * 50 and lru.pop("a") is None
    assert lru.held == 0
