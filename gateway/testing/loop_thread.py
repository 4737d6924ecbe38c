"""An event loop of its own on a daemon thread: the servers a test needs run there, so a
sync test and an async one (whose loop is busy running it) reach them alike."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

START_SECONDS = 60.0


class LoopThread:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="loopwatch-pytest", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = START_SECONDS) -> T:
        """Run `coroutine` on the thread's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=START_SECONDS)
        self._loop.close()
