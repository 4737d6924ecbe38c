"""Recording with a crash-safe hand-off: the proxy spools each record (one write(2), before
its client has the answer); a drain (recording.drain) reads the spool, the recorder stores it.

What is spooled survives a SIGKILL of the gateway and is stored by the next gateway on the
store (recording.ownership). Progress is shared through a small mmap'd file
(recording.progress), so the gateway can report queue depth, drops and batch times, and wait
in `flush()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gateway.recording import codec as records
from gateway.recording import ownership
from gateway.recording.progress import Progress, Waker, progress_path
from gateway.recording.spool import Position, SpoolReader, SpoolWriter, segments, writer_names

log = logging.getLogger(__name__)

Record = records.Record
WRITER_NAME = "w0"  # a single gateway process; workers are w0 … w<N-1>


def writer_name(worker: int | None) -> str:
    return WRITER_NAME if worker is None else f"w{worker}"


_DROP_LOG_SECONDS = 10.0


def spooled_keys(root: Path, own: Path) -> Iterator[str]:
    """Continuation keys of records spooled by other runs (some may not be stored yet):
    every writer's segments in every spool under `root` but this gateway's own."""
    for directory in ownership.candidates(root, own):
        with contextlib.suppress(OSError):
            for name in writer_names(directory):
                yield from _keys_of(directory, name, Position(1 << 62, 0))


def _keys_of(directory: Path, name: str, stop: Position) -> Iterator[str]:
    existing = segments(directory, name)
    if not existing:
        return
    reader = SpoolReader(directory, name, Position(existing[0], 0))
    try:
        while lines := reader.read(1000):
            for line, position in lines:
                if position.seq >= stop.seq:
                    return
                with contextlib.suppress(ValueError, IndexError):
                    if key := records.continuation_key(line):
                        yield key
    finally:
        reader.close()


class SpoolRecorder:
    """What the proxy submits records to. `submit` never blocks on the store and never
    raises; past `queue_size` records not yet stored, records are dropped and counted."""

    def __init__(self, directory: Path, name: str, *, queue_size: int) -> None:
        self.directory = directory
        self._writer = SpoolWriter(directory, name)
        self.progress = Progress(progress_path(directory, name), create=True)
        self.progress.set("first_seq", self._writer.first_seq)
        self._waker = Waker(directory, self.progress)
        self._queue_size = queue_size
        self._dropped = 0
        self._last_drop_log = -_DROP_LOG_SECONDS
        self._closed = False
        # Set by an in-process drain: records arrived (it looks only if asleep), read now.
        self.wake: Callable[[], None] | None = None
        self.hurry: Callable[[], None] | None = None
        self._hand: Callable[[Record, Position, Position], None] | None = None
        self._batches_seen = (0, 0.0)

    @property
    def name(self) -> str:
        return self._writer.name

    @property
    def position(self) -> Position:
        """Right after the last record spooled."""
        return self._writer.position

    def hand_to(self, accept: Callable[[Record, Position, Position], None] | None) -> None:
        """An in-process drain has read the spool up to here: from now on each record is
        also handed to it as it is, so it is not read back and decoded."""
        self._hand = accept

    @property
    def queue_depth(self) -> int:
        """Records spooled and not yet stored."""
        return max(0, self._writer.lines - self.progress.get("committed"))

    @property
    def dropped_total(self) -> int:
        return self._dropped + self.progress.get("dropped")

    @property
    def write_errors_total(self) -> int:
        return self.progress.get("write_errors")

    @property
    def last_batch_seconds(self) -> float:
        return self.progress.get("last_batch_ns") / 1e9

    @property
    def wakeups_total(self) -> int:
        """Times the drain woke to read the spool (it sleeps until a record is spooled)."""
        return self.progress.get("wakeups")

    def new_batches(self) -> list[float]:
        """Durations of the batches written since the last call (their mean, per batch:
        the drain shares totals, not each one)."""
        published = self.progress.snapshot()
        batches, seconds = published["batches"], published["batch_ns"] / 1e9
        count = batches - self._batches_seen[0]
        spent = seconds - self._batches_seen[1]
        self._batches_seen = (batches, seconds)
        return [spent / count] * count if count > 0 else []

    def submit(self, record: Record) -> None:
        """Spool a record; when this returns it survives a crash of this process."""
        if self._closed or self.queue_depth >= self._queue_size:
            self._drop()
            return
        start = self._writer.position
        try:
            self._writer.append(records.encode(record))
        except Exception:
            log.exception("spooling a record failed: record dropped")
            self._drop()
            return
        if self._hand is not None:
            self._hand(record, start, self._writer.position)
        if self.wake is not None:
            self.wake()
        else:
            self._waker()  # a system call only for the first record of a drain's sleep

    def _drop(self) -> None:
        self._dropped += 1
        now = time.monotonic()
        if now - self._last_drop_log >= _DROP_LOG_SECONDS:
            self._last_drop_log = now
            state = "closed" if self._closed else f"full ({self._queue_size})"
            log.warning("recorder %s: records dropped, %d so far", state, self._dropped)

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every record submitted so far is stored (or given up on)."""
        target = self._writer.lines
        self.progress.set("flush_wanted", target)
        if self.hurry is not None:
            self.hurry()
        else:
            self._waker(always=True)
        async with asyncio.timeout(timeout):
            while self.progress.get("committed") < target:
                await asyncio.sleep(0.002)

    def close(self) -> None:
        """Spool no more; what is spooled and not stored is stored at the next start."""
        self._closed = True
        self._writer.close()
        self._waker.close()
