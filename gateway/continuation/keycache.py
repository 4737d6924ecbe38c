"""Continuation keys with memory: an agent's next request repeats the history its last one
hashed, so each chain step (state, item) → state is kept and only new items are hashed.

Sans-IO. The chain values are exactly ContinuationKeys'; only the work is not repeated.
"""

from __future__ import annotations

import threading

from gateway.continuation.keys import ContinuationKeys
from gateway.items import Item
from gateway.memory import CONTINUATION_KEYS_BYTES, TUPLE, ByteLru, text_bytes

# Items whose hashed fields are longer than this are hashed each time: one would take the
# room of hundreds of short ones.
MAX_ITEM_CHARS = 4096

_Key = tuple[bytes, str, str | None, str | None, str | None, str | None, bool | None]


def _entry_bytes(key: _Key, value: bytes) -> int:
    """The key tuple, the texts it holds (the state and value are 20-byte digests)."""
    state, _, text, call_id, tool_name, arguments, _ = key
    strings = text_bytes(text) + text_bytes(call_id) + text_bytes(tool_name)
    return TUPLE + 56 + text_bytes(state) + strings + text_bytes(arguments) + text_bytes(value)


class CachedContinuationKeys(ContinuationKeys):
    def __init__(self, secret: bytes, budget: int = CONTINUATION_KEYS_BYTES) -> None:
        super().__init__(secret)
        self._steps = ByteLru[_Key, bytes](budget, _entry_bytes)
        # Very long histories are hashed in a thread while the loop hashes others.
        self._lock = threading.Lock()

    def _step(self, state: bytes, item: Item) -> bytes:
        size = len(item.text or "") + len(item.arguments or "")
        if size > MAX_ITEM_CHARS:
            return super()._step(state, item)
        # Every field the chain hashes, so an equal key means an equal chain value.
        key = (
            state,
            item.kind.value,
            item.text,
            item.call_id,
            item.tool_name,
            item.arguments,
            item.is_error,
        )
        with self._lock:
            found = self._steps.get(key)
            if found is not None:
                self._steps.touch(key)
                return found
        value = super()._step(state, item)
        with self._lock:
            self._steps.put(key, value)
        return value
