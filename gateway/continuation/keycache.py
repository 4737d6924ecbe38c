"""Continuation keys with memory: an agent's next request repeats the history its last one
hashed, so each chain step (state, item) → state is kept and only new items are hashed.

Sans-IO. The chain values are exactly ContinuationKeys'; only the work is not repeated.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from gateway.continuation.keys import ContinuationKeys
from gateway.items import Item

# Items whose hashed fields are longer than this are hashed each time: the memory holds
# their text, so it stays bounded (entries x this) whatever a history carries.
MAX_ITEM_CHARS = 4096
CAPACITY = 20_000

_Key = tuple[bytes, str, str | None, str | None, str | None, str | None, bool | None]


class CachedContinuationKeys(ContinuationKeys):
    def __init__(self, secret: bytes, capacity: int = CAPACITY) -> None:
        super().__init__(secret)
        self._capacity = capacity
        self._steps: OrderedDict[_Key, bytes] = OrderedDict()
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
                self._steps.move_to_end(key)
                return found
        value = super()._step(state, item)
        with self._lock:
            self._steps[key] = value
            if len(self._steps) > self._capacity:
                self._steps.popitem(last=False)
        return value
