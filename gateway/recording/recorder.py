"""Recorder: a bounded buffer of records, written in batches off the event loop.

Submitting never blocks and never raises; past the bound records are dropped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from gateway.background import Background
from gateway.recording.codec import Record
from gateway.store.write.writer import is_transient

log = logging.getLogger(__name__)

Submitted = Record | bytes  # a record, or its spooled line for the transform to decode
Transform = Callable[[Submitted], Record]
BatchHook = Callable[[float, int], None]
T = TypeVar("T")
# Past a full queue, one warning per this many seconds: a flood must not flood the log too.
_DROP_LOG_SECONDS = 10.0


class BatchWriter(Protocol):
    def write_batch(self, records: Sequence[Record]) -> None: ...


def identity(record: Submitted) -> Record:
    assert not isinstance(record, bytes), "a spooled line needs a decoding transform"
    return record


class Recorder:
    """Collects records on the loop; one worker thread transforms and writes them.

    One thread, so SQLite sees a single writer and batches land in submission order.
    A failing write keeps its batch and retries with capped exponential backoff while new
    records queue; only the queue bound (or an unwritable record) loses data, and it is counted.
    """

    def __init__(
        self,
        writer: BatchWriter,
        *,
        transform: Transform = identity,
        queue_size: int = 10_000,
        batch_size: int = 200,
        flush_seconds: float = 0.05,
        on_batch: BatchHook | None = None,
        retry_initial: float = 0.1,
        retry_max: float = 5.0,
    ) -> None:
        self._writer = writer
        self._transform = transform
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._on_batch = on_batch
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._buffer: deque[Submitted] = deque()
        self._in_flight = 0
        self._arrived = asyncio.Event()  # the buffer became non-empty
        self._batch_full = asyncio.Event()  # no reason to wait for flush_seconds
        self._progress = asyncio.Event()  # a batch finished; flush() re-checks
        self._accepted = 0
        self._finished = 0  # written or given up on, in submission order
        self._closing = False
        self._flush_waiters = 0
        self._kicked = False  # write what is buffered without waiting for more
        self._last_drop_log = -_DROP_LOG_SECONDS
        self._task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.on_progress: Callable[[], None] | None = None  # after each batch is finished
        self.dropped_total = 0
        self.write_errors_total = 0
        self.last_batch_seconds = 0.0
        self.batches_total = 0
        self.batch_seconds_total = 0.0

    @property
    def queue_depth(self) -> int:
        """Records waiting, including the batch being written."""
        return len(self._buffer) + self._in_flight

    @property
    def finished(self) -> int:
        """Records written or given up on so far, in submission order."""
        return self._finished

    def submit(self, record: Submitted) -> None:
        """Queue a record; never blocks, never raises. Call from the event loop's thread."""
        if self._closing or len(self._buffer) >= self._queue_size:
            self._drop()
            return
        self._buffer.append(record)
        self._accepted += 1
        self._arrived.set()
        if len(self._buffer) >= self._batch_size:
            self._batch_full.set()

    def kick(self) -> None:
        """Write what is buffered now, without the batching delay: the caller gathered it."""
        if self._buffer:
            self._kicked = True
            self._batch_full.set()

    def _drop(self) -> None:
        self.dropped_total += 1
        now = time.monotonic()
        if now - self._last_drop_log >= _DROP_LOG_SECONDS:
            self._last_drop_log = now
            state = "closed" if self._closing else f"full ({self._queue_size})"
            log.warning("recorder %s: records dropped, %d so far", state, self.dropped_total)

    def start(self, owner: Background) -> None:
        if self._task is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopwatch-writer")
        self._task = owner.task("recorder", self._run())

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every record submitted so far is written (or dropped)."""
        target = self._accepted
        self._flush_waiters += 1
        self._batch_full.set()  # no batching delay: someone is waiting
        try:
            async with asyncio.timeout(timeout):
                while self._finished < target:
                    self._progress.clear()
                    await self._progress.wait()
        finally:
            self._flush_waiters -= 1

    async def close(self, timeout: float = 10.0) -> None:
        """Write what is pending, waiting at most `timeout`; count what is left as dropped."""
        self._closing = True
        self._arrived.set()
        self._batch_full.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                lost = self.queue_depth
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                self.dropped_total += lost
                log.error("recorder closed with %d records unwritten", lost)
            self._task = None
        if self._executor is not None:
            # A write stuck in the database cannot be interrupted; do not wait for it.
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def _run(self) -> None:
        while True:
            batch = await self._next_batch()
            if not batch:
                return
            self._in_flight = len(batch)
            try:
                await self._deliver(batch)
            finally:
                self._in_flight = 0
                self._finished += len(batch)
                self._progress.set()
                if self.on_progress is not None:
                    self.on_progress()

    async def _next_batch(self) -> list[Submitted]:
        while not self._buffer:
            if self._closing:
                return []
            self._arrived.clear()
            await self._arrived.wait()
        if len(self._buffer) < self._batch_size and not (
            self._closing or self._flush_waiters or self._kicked
        ):
            # Wait briefly so one transaction carries many records.
            self._batch_full.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._batch_full.wait(), self._flush_seconds)
        count = min(len(self._buffer), self._batch_size)
        batch = [self._buffer.popleft() for _ in range(count)]
        if not self._buffer:
            self._kicked = False
        return batch

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    async def _deliver(self, batch: list[Submitted]) -> None:
        records, failed = await self._in_thread(self._transformed, batch)
        self.dropped_total += failed
        delay = self._retry_initial
        while records:
            started = time.perf_counter()
            try:
                await self._in_thread(self._writer.write_batch, records)
            except Exception as exc:
                self.write_errors_total += 1
                if not is_transient(exc):
                    records = await self._isolate(records)
                    if not records:
                        return
                log.warning("recorder write failed, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_max)
            else:
                self._batch_done(time.perf_counter() - started, len(records))
                return

    def _transformed(self, batch: list[Submitted]) -> tuple[list[Record], int]:
        """Runs in the worker thread: redaction is CPU work the loop should not do."""
        out: list[Record] = []
        for record in batch:
            try:
                out.append(self._transform(record))
            except Exception:
                # Never store what could not be redacted.
                log.exception("recorder transform failed: record dropped")
        return out, len(batch) - len(out)

    async def _isolate(self, records: list[Record]) -> list[Record]:
        """A batch failed for a reason a retry will not fix: write records one by one,
        dropping the ones that fail that way; return the rest if the database goes away."""
        log.error("recorder batch of %d rejected; writing records one by one", len(records))
        for index, record in enumerate(records):
            try:
                await self._in_thread(self._writer.write_batch, [record])
            except Exception as exc:
                self.write_errors_total += 1
                if is_transient(exc):
                    return records[index:]
                self.dropped_total += 1
                log.error("recorder dropped an unwritable record: %s", exc)
        return []

    def _batch_done(self, seconds: float, size: int) -> None:
        self.last_batch_seconds = seconds
        self.batches_total += 1
        self.batch_seconds_total += seconds
        if self._on_batch is not None:
            try:
                self._on_batch(seconds, size)
            except Exception:
                log.exception("recorder on_batch hook failed")
