"""The owner of background work: every task, thread and process the gateway starts is started
here, named, tracked, and stopped in reverse order of start with bounded waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
Stop = Callable[[], object]  # asks politely: sets an event, closes a pipe; never blocks
GRACE_SECONDS = 10.0  # how long a stopping task, thread or process may take before it is forced
_FORCED_SECONDS = 2.0  # after a cancel or a kill


class _Process:
    __slots__ = ("name", "popen", "stop")

    def __init__(self, name: str, popen: subprocess.Popen[bytes], stop: Stop | None) -> None:
        self.name, self.popen, self.stop = name, popen, stop


class _Adopted:
    __slots__ = ("close", "name")

    def __init__(self, name: str, close: Callable[[], Awaitable[object]]) -> None:
        self.name, self.close = name, close


class Background:
    """Starts named work and stops it, last started first. A task removes itself when done,
    so a short one per request costs a dict entry for its lifetime; a background task's
    failure is logged by name. `adopt` and `enter` put a component's own close in the order:
    started after the work it spawned, it runs before the owner forces that work to stop."""

    def __init__(self, *, grace: float = GRACE_SECONDS) -> None:
        self._grace = grace
        # Insertion-ordered: popitem() gives the last started first.
        self._owned: dict[object, Stop | None] = {}

    def __len__(self) -> int:
        """What is running or waiting to be stopped."""
        return len(self._owned)

    def task(
        self,
        name: str,
        coro: Coroutine[Any, Any, T],
        *,
        stop: Stop | None = None,
        finish: bool = False,
        awaited: bool = False,
    ) -> asyncio.Task[T]:
        """`stop`: asked first at the owner's stop, then the task has the grace period before
        it is cancelled (without one it is cancelled at once); `finish`: a write that ends by
        itself, given the grace period as is. `awaited`: its starter takes its result or
        failure, so a failure is not logged here."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._owned[task] = _let_finish if finish and stop is None else stop
        task.add_done_callback(self._awaited_done if awaited else self._done)
        return task

    def thread(
        self, name: str, target: Callable[..., object], *args: object, stop: Stop | None = None
    ) -> threading.Thread:
        """A daemon thread: one that does not stop within the grace period is logged and left
        to end with the process."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._owned[thread] = stop
        thread.start()
        return thread

    def process(
        self, name: str, argv: Sequence[str], *, stop: Stop | None = None, **options: Any
    ) -> subprocess.Popen[bytes]:
        """A child process; without `stop` it is terminated at the owner's stop."""
        popen: subprocess.Popen[bytes] = subprocess.Popen(argv, **options)
        self._owned[_Process(name, popen, stop)] = None
        return popen

    def adopt(self, name: str, close: Callable[[], Awaitable[object]]) -> None:
        """A component's own close, awaited at its place in the order; it bounds its waits."""
        self._owned[_Adopted(name, close)] = None

    def child(self, name: str) -> Background:
        """An owner for one component's work, stopped at this place in the order: what the
        component starts later still stops before what was started before it."""
        child = Background(grace=self._grace)
        self.adopt(name, child.stop)
        return child

    async def enter(self, name: str, context: AbstractAsyncContextManager[T]) -> T:
        """Enter `context` now and exit it at its place in the order."""
        value = await context.__aenter__()
        self.adopt(name, _exit_of(context))
        return value

    async def stop(self) -> None:
        """Stop everything, last started first; what starts meanwhile is stopped too."""
        while self._owned:
            key, stop = self._owned.popitem()
            try:
                await self._stop_one(key, stop)
            except Exception:
                log.exception("stopping %s failed", _name(key))

    async def _stop_one(self, key: object, stop: Stop | None) -> None:
        if isinstance(key, _Adopted):
            await key.close()
        elif isinstance(key, asyncio.Task):
            await self._stop_task(key, stop)
        elif isinstance(key, threading.Thread):
            await self._stop_thread(key, stop)
        elif isinstance(key, _Process):
            await self._stop_process(key)

    async def _stop_task(self, task: asyncio.Task[Any], stop: Stop | None) -> None:
        if task.done():
            return
        if stop is not None:
            stop()
            await asyncio.wait((task,), timeout=self._grace)
        if not task.done():
            task.cancel()
            await asyncio.wait((task,), timeout=_FORCED_SECONDS)
        if not task.done():
            log.warning("background task %s did not stop", task.get_name())

    async def _stop_thread(self, thread: threading.Thread, stop: Stop | None) -> None:
        if stop is not None:
            stop()
        if thread.is_alive():
            await asyncio.to_thread(thread.join, self._grace)
        if thread.is_alive():
            log.warning("background thread %s did not stop; it ends with the process", thread.name)

    async def _stop_process(self, owned: _Process) -> None:
        popen = owned.popen
        if popen.poll() is not None:
            return
        if owned.stop is not None:
            owned.stop()
            await self._exited(popen, self._grace)
        for force in (popen.terminate, popen.kill):
            if popen.poll() is not None:
                return
            force()
            await self._exited(popen, _FORCED_SECONDS)
        log.warning("process %s (pid %d) did not stop", owned.name, popen.pid)

    @staticmethod
    async def _exited(popen: subprocess.Popen[bytes], seconds: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(popen.wait, seconds)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._owned.pop(task, None)
        if not task.cancelled() and (failure := task.exception()) is not None:
            log.error("background task %s failed", task.get_name(), exc_info=failure)

    def _awaited_done(self, task: asyncio.Task[Any]) -> None:
        self._owned.pop(task, None)


def _let_finish() -> None:
    return None


def _exit_of(context: AbstractAsyncContextManager[Any]) -> Callable[[], Awaitable[object]]:
    def close() -> Awaitable[object]:
        return context.__aexit__(None, None, None)

    return close


def _name(key: object) -> str:
    if isinstance(key, asyncio.Task):
        return key.get_name()
    return str(getattr(key, "name", key))
