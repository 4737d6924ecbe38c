"""Recording with a crash-safe hand-off: the proxy spools each record (one write(2), before
its client has the answer); a drain reads the spool, and the recorder redacts and stores it.

The drain runs in a recorder process (off the proxy's event loop and GIL) or, for tests
and embedding, in a thread of the gateway. Either way what is spooled survives a SIGKILL of
the gateway and is stored at the next start. `Progress` is shared through a small mmap'd
file, so the gateway can report queue depth, drops and batch times, and wait in `flush()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import mmap
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from gateway import records
from gateway.errors import ConfigError
from gateway.recorder import Recorder
from gateway.spool import (
    Position,
    SpoolReader,
    SpoolWriter,
    ensure_directory,
    read_checkpoint,
    segments,
    write_checkpoint,
    writer_names,
)
from gateway.step import RefusalRecord, StepRecord

log = logging.getLogger(__name__)

Record = StepRecord | RefusalRecord
WRITER_NAME = "w0"  # a single gateway process; workers are w0 … w<N-1>


def writer_name(worker: int | None) -> str:
    return WRITER_NAME if worker is None else f"w{worker}"


_DROP_LOG_SECONDS = 10.0
# Progress fields, each an int64 written by one side only (aligned 8-byte stores are atomic).
_FIELDS = (
    "first_seq",  # gateway: the first segment of this run
    "flush_wanted",  # gateway: a line count it waits for (no batching delay meanwhile)
    "committed",  # drain: lines of this run stored or given up on
    "dropped",  # drain: records given up on (unwritable, unredactable, undecodable)
    "write_errors",  # drain
    "batches",  # drain
    "batch_ns",  # drain: total time of those batches
    "last_batch_ns",  # drain
)
_LAYOUT = struct.Struct(f"<{len(_FIELDS)}q")


class Progress:
    """The shared counters of one spool writer (see _FIELDS), in `<name>.progress`."""

    def __init__(self, path: Path, *, create: bool) -> None:
        if create:  # a new file (new inode): a drain of an earlier run cannot write into it
            temporary = path.with_suffix(".progress.tmp")
            temporary.write_bytes(bytes(_LAYOUT.size))
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
        with path.open("r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), _LAYOUT.size)

    def get(self, field: str) -> int:
        index = _FIELDS.index(field)
        return int(struct.unpack_from("<q", self._map, index * 8)[0])

    def set(self, field: str, value: int) -> None:
        struct.pack_into("<q", self._map, _FIELDS.index(field) * 8, value)

    def add(self, field: str, value: int) -> None:
        self.set(field, self.get(field) + value)

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()


def progress_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.progress"


@contextlib.contextmanager
def claim_spool(directory: Path) -> Iterator[None]:
    """Hold the spool directory for this gateway's lifetime; a second gateway is refused."""
    try:
        ensure_directory(directory)
        lock = (directory / "gateway.lock").open("w")
    except OSError as exc:
        raise ConfigError(
            f"invalid setting spool_dir (LOOPWATCH_SPOOL_DIR): {directory} is not writable: {exc}"
        ) from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"invalid setting spool_dir (LOOPWATCH_SPOOL_DIR): {directory} is in use by "
                "another running gateway; give each gateway its own spool_dir"
            ) from None
        yield


def spooled_keys(directory: Path, before: Position) -> Iterator[str]:
    """Continuation keys of records spooled by earlier runs (some may not be stored yet):
    every writer's segments, this gateway's own up to `before`."""
    for name in writer_names(directory):
        stop = before if name == WRITER_NAME else Position(1 << 62, 0)
        yield from _keys_of(directory, name, stop)


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
        self._writer = SpoolWriter(directory, name)
        self.progress = Progress(progress_path(directory, name), create=True)
        self.progress.set("first_seq", self._writer.first_seq)
        self._queue_size = queue_size
        self._dropped = 0
        self._last_drop_log = -_DROP_LOG_SECONDS
        self._closed = False
        self.wake: Callable[[], None] | None = None  # set by an in-process drain
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
    def first_position(self) -> Position:
        """Where this run's records begin in the spool."""
        return Position(self._writer.first_seq, 0)

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

    def new_batches(self) -> list[float]:
        """Durations of the batches written since the last call (their mean, per batch:
        the drain shares totals, not each one)."""
        batches, seconds = self.progress.get("batches"), self.progress.get("batch_ns") / 1e9
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
        if self.wake is not None:
            self.wake()
        async with asyncio.timeout(timeout):
            while self.progress.get("committed") < target:
                await asyncio.sleep(0.002)

    def close(self) -> None:
        """Spool no more; what is spooled and not stored is stored at the next start."""
        self._closed = True
        self._writer.close()


class Drain:
    """Reads every writer's spool from its checkpoint and feeds the recorder, in order;
    checkpoints what the recorder has stored. Runs on the event loop of its process."""

    def __init__(
        self,
        directory: Path,
        recorder: Recorder,
        *,
        active: list[str],
        poll_seconds: float = 0.01,
        batch_size: int = 200,
        queue_size: int = 10_000,
        local: SpoolRecorder | None = None,
    ) -> None:
        self._directory = directory
        self._local = local  # the writer in this process, whose records can come by hand
        self._direct = False
        self._recorder = recorder
        self._active = active
        self._poll = poll_seconds
        self._batch = batch_size
        self._room = queue_size
        self._readers: dict[str, SpoolReader] = {}
        self._progress: dict[str, Progress] = {}
        self._inodes: dict[str, int] = {}
        self._refresh()
        self._pending: deque[tuple[str, Position, bool]] = deque()  # submitted, not finished
        self._seen_finished = 0
        self._stored: dict[str, Position] = {}
        self._woken = asyncio.Event()
        self._stopping = False
        self.replayed = 0  # records of earlier runs

    def wake(self) -> None:
        self._woken.set()

    def _refresh(self) -> None:
        """(Re)open each active writer's progress file: a writer that (re)started after this
        drain made a new one."""
        for name in self._active:
            try:
                inode = progress_path(self._directory, name).stat().st_ino
            except FileNotFoundError:
                continue
            if self._inodes.get(name) != inode:
                old = self._progress.pop(name, None)
                if old is not None:
                    old.close()
                self._progress[name] = Progress(progress_path(self._directory, name), create=False)
                self._inodes[name] = inode

    def _reader(self, name: str) -> SpoolReader:
        reader = self._readers.get(name)
        if reader is None:
            start = read_checkpoint(self._directory, name)
            if start is None:
                existing = segments(self._directory, name)
                start = Position(existing[0] if existing else 1, 0)
            reader = self._readers[name] = SpoolReader(self._directory, name, start)
        return reader

    def pull(self) -> int:
        """Move spooled lines into the recorder (earlier runs first); how many moved."""
        moved = 0
        inactive = [n for n in writer_names(self._directory) if n not in self._active]
        for name in inactive + self._active:
            room = self._room - self._recorder.queue_depth
            if room <= 0:
                break
            if self._direct and name == self._local_name:
                continue
            lines = self._reader(name).read(min(room, self._batch * 4))
            progress = self._progress.get(name)
            first = progress.get("first_seq") if progress is not None else 1 << 62
            for line, position in lines:
                self._recorder.submit(line)
                current = position.seq >= first
                self._pending.append((name, position, current))
                self.replayed += not current
            moved += len(lines)
            self._maybe_direct(name)
        return moved

    @property
    def _local_name(self) -> str | None:
        return None if self._local is None else self._local.name

    def _maybe_direct(self, name: str) -> None:
        """Once the local writer's spool is read to its end, take its records by hand."""
        local = self._local
        if local is None or self._direct or name != local.name:
            return
        if self._reader(name).position == local.position:
            self._direct = True
            local.hand_to(self._accept)

    def _accept(self, record: Record, start: Position, end: Position) -> None:
        local = self._local
        assert local is not None
        if self._recorder.queue_depth >= self._room:
            # The recorder is full (a long replay, a database away): read the spool again
            # from this record on, as a drain in another process would.
            self._direct = False
            local.hand_to(None)
            self._readers[local.name] = SpoolReader(self._directory, local.name, start)
            return
        self._recorder.submit(record)
        self._pending.append((local.name, end, True))

    def settle(self) -> None:
        """Checkpoint what the recorder has finished with; publish progress."""
        done = self._recorder.finished - self._seen_finished
        self._seen_finished += done
        counts: dict[str, int] = {}
        for _ in range(done):
            name, position, current = self._pending.popleft()
            self._stored[name] = position
            counts[name] = counts.get(name, 0) + current
        for name, position in list(self._stored.items()):
            write_checkpoint(self._directory, name, position)
            self._readers[name].release_before(position)
            progress = self._progress.get(name)
            if progress is not None:
                progress.add("committed", counts.get(name, 0))
            del self._stored[name]
        self._publish()

    def _publish(self) -> None:
        recorder = self._recorder
        for progress in self._progress.values():
            progress.set("write_errors", recorder.write_errors_total)
            progress.set("dropped", recorder.dropped_total)
            progress.set("batches", recorder.batches_total)
            progress.set("batch_ns", int(recorder.batch_seconds_total * 1e9))
            progress.set("last_batch_ns", int(recorder.last_batch_seconds * 1e9))
            break  # counters of the whole drain go on the first writer's progress

    def flush_wanted(self) -> bool:
        """A gateway waits in flush(): write without the batching delay."""
        return any(p.get("committed") < p.get("flush_wanted") for p in self._progress.values())

    async def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        self._recorder.start()
        try:
            while not (self._stopping or should_stop()):
                self._refresh()
                moved = self.pull()
                if self.flush_wanted():
                    with contextlib.suppress(TimeoutError):
                        await self._recorder.flush(timeout=self._poll * 10)
                self.settle()
                if not moved:
                    self._woken.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._woken.wait(), self._poll)
        finally:
            await self.stop()

    async def stop(self, timeout: float = 10.0) -> None:
        """Store what was pulled (within `timeout`); the rest waits in the spool."""
        if self._stopping:
            return
        self._stopping = True
        deadline = time.monotonic() + timeout
        self._refresh()
        while True:  # everything spooled, as far as the time allows
            moved = self.pull()
            with contextlib.suppress(TimeoutError):
                await self._recorder.flush(timeout=max(0.0, deadline - time.monotonic()))
            self.settle()
            if not moved or time.monotonic() >= deadline:
                break
        await self._recorder.close(timeout=0.1)
        for reader in self._readers.values():
            reader.close()
