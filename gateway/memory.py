"""The byte budgets of the gateway's in-memory indexes and caches, and the map that keeps one.

The interpreter and its imports take some 80-100 MB; the budgets below add at most ~40 MB,
so a gateway stays under 150 MB resident however long it runs. Sizes are estimates of
CPython's objects (a few constants and the length of each text), charged for every entry
held: an object shared by several maps is charged in each, so the real use is lower.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

MB = 1024 * 1024
RECENT_STEPS_BYTES = 20 * MB  # continuation: recent steps, their keys and claims
CONTINUATION_KEYS_BYTES = 4 * MB  # continuation: chain steps already hashed
REMEMBERED_ELEMENTS_BYTES = 4 * MB  # each chat protocol: history elements already typed
MODEL_CALLS_BYTES = 8 * MB  # MCP: the model's recent tool calls, to join executions to

# CPython object sizes (64-bit): an OrderedDict entry with its node, a str header, a tuple
# header, a slotted object of eight fields, a small dict.
ENTRY = 104
STR = 49
TUPLE = 40
SLOTS = 96
DICT = 232

K = TypeVar("K")
V = TypeVar("V")


def text_bytes(text: str | bytes | None) -> int:
    return 0 if text is None else STR + len(text)


class ByteLru(Generic[K, V]):
    """An ordered map bounded in bytes: past its budget the least recently put entries go
    first (an entry larger than the whole budget is not kept, and takes no other's place).
    `size(key, value)` estimates what an entry holds; it is taken once, when put."""

    def __init__(self, budget: int, size: Callable[[K, V], int]) -> None:
        self.budget = budget
        self.held = 0
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def put(self, key: K, value: V, size: int | None = None) -> None:
        """Newest last, replacing what the key held; then the oldest go while over budget.
        `size`: the entry's estimate when the caller has it already."""
        cost = ENTRY + (self._size(key, value) if size is None else size)
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.held -= old[1]
        if cost > self.budget:
            return  # it would push out all the others, and then itself
        entries[key] = (value, cost)
        self.held += cost
        while self.held > self.budget and entries:
            self.held -= entries.popitem(last=False)[1][1]

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        return None if found is None else found[0]

    def touch(self, key: K) -> None:
        """The key was used: it goes last."""
        if key in self._entries:
            self._entries.move_to_end(key)

    def pop(self, key: K) -> V | None:
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self.held -= found[1]
        return found[0]

    def oldest(self) -> K | None:
        return next(iter(self._entries), None)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)
