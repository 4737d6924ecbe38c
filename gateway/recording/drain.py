"""The drain: reads spooled records (its own gateway's and those of spools it adopted from
gateways that are gone), feeds the recorder in order, checkpoints what is stored.

It sleeps until woken: by a writer (a spooled record, a flush), by the recorder (a batch
stored), or once per `adopt_seconds` to look for spools whose owner is gone. While records
keep coming it stays awake, unpoked, and lets them gather between reads: the pause doubles
from `GATHER_SECONDS` while each read finds records, up to `gather_max` (the setting
`recorder_flush_seconds`), so a busy recorder commits one larger batch per pause and a
record waits at most that pause plus a write. Each read is one batch for the recorder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from pathlib import Path
from typing import IO

from gateway.background import Background
from gateway.recording import ownership
from gateway.recording.progress import Progress, progress_path
from gateway.recording.recorder import Recorder
from gateway.recording.spool import (
    Position,
    SpoolReader,
    read_checkpoint,
    segments,
    write_checkpoint,
)
from gateway.recording.spool import writer_names as names_in
from gateway.recording.spooler import Record, SpoolRecorder

log = logging.getLogger(__name__)

Source = tuple[Path, str]  # a spool directory and a writer in it
# While records keep coming, the first pause between reads (a flush never waits for one).
GATHER_SECONDS = 0.01
GATHER_MAX_SECONDS = 0.2


class Drain:
    """Feeds the recorder from every writer of its directory and of adopted directories,
    earlier runs first; checkpoints what the recorder has stored."""

    def __init__(
        self,
        directory: Path,
        recorder: Recorder,
        *,
        active: list[str],
        root: Path | None = None,
        batch_size: int = 200,
        queue_size: int = 10_000,
        local: SpoolRecorder | None = None,
        adopt_seconds: float = 2.0,
        gather_max: float = GATHER_MAX_SECONDS,
    ) -> None:
        self._own = directory
        self._root = root  # where other owners' spools are adopted from (None: nowhere)
        self._local = local  # the writer in this process, whose records can come by hand
        self._direct = False
        self._recorder = recorder
        recorder.on_progress = self.nudge  # a sleeping drain checkpoints a stored batch
        self._active = active
        self._batch = batch_size
        self._room = queue_size
        self._adopt_seconds = adopt_seconds
        self._gather_max = gather_max
        self._pause = 0.0  # the current pause between reads while records keep coming
        self._handed = 0  # records taken by hand since the last read
        self._readers: dict[Source, SpoolReader] = {}
        self._progress: dict[str, Progress] = {}
        self._inodes: dict[str, int] = {}
        self._committed: dict[str, int] = {}
        self._adopted: dict[Path, IO[str]] = {}
        self._pending: deque[tuple[Source, Position, bool]] = deque()  # submitted, unfinished
        self._seen_finished = 0
        self._stored: dict[Source, Position] = {}
        self._woken = asyncio.Event()
        self._stop_requested = False
        self._stopping = False
        self._sleeping = False
        self._wakeups = 0
        self.replayed = 0  # records of earlier runs or other owners
        self._refresh()

    def wake(self) -> None:
        """A flush, or a poke of the wake-up pipe: read now, whatever the drain waits for."""
        self._woken.set()

    def nudge(self) -> None:
        """Records arrived (by hand) or a batch was stored: only a sleeping drain needs to
        know, an awake one reads and checkpoints at the end of its pause."""
        if self._sleeping:
            self._woken.set()

    def request_stop(self) -> None:
        self._stop_requested = True
        self._woken.set()

    def _refresh(self) -> None:
        """(Re)open each active writer's progress file: a writer that (re)started after this
        drain made a new one."""
        for name in self._active:
            try:
                inode = progress_path(self._own, name).stat().st_ino
            except FileNotFoundError:
                continue
            if self._inodes.get(name) != inode:
                old = self._progress.pop(name, None)
                if old is not None:
                    old.close()
                progress = Progress(progress_path(self._own, name), create=False)
                self._progress[name] = progress
                self._inodes[name] = inode
                # An earlier drain of this run (a recorder started again) counted these.
                published = progress.snapshot()
                self._committed[name] = published["committed"]
                # Its sleeps too: a writer pokes each sleep once, known by its number, so
                # this drain's sleeps take numbers no writer has poked.
                self._wakeups = max(self._wakeups, published["wakeups"] + 1)

    def adopt(self) -> None:
        """Take every spool under the root whose owner is gone."""
        if self._root is None:
            return
        for directory in ownership.candidates(self._root, self._own):
            if directory in self._adopted:
                continue
            handle = ownership.try_adopt(directory)
            if handle is not None:
                log.info("recorder adopts the spool of a stopped gateway: %s", directory.name)
                self._adopted[directory] = handle

    def _reader(self, source: Source) -> SpoolReader:
        reader = self._readers.get(source)
        if reader is None:
            directory, name = source
            start = read_checkpoint(directory, name)
            if start is None:
                existing = segments(directory, name)
                start = Position(existing[0] if existing else 1, 0)
            reader = self._readers[source] = SpoolReader(directory, name, start)
        return reader

    def _sources(self) -> list[Source]:
        adopted = [(d, n) for d in self._adopted for n in names_in(d)]
        own = [n for n in names_in(self._own) if n not in self._active] + self._active
        return adopted + [(self._own, n) for n in own]

    def pull(self) -> int:
        """Move spooled lines into the recorder (earlier runs first); how many moved. An
        adopted directory read to its end is released once stored."""
        moved = 0
        unfinished: set[Path] = set()
        for source in self._sources():
            room = self._room - self._recorder.queue_depth
            if room <= 0:
                unfinished.add(source[0])
                continue
            if self._direct and source == (self._own, self._local_name):
                continue
            limit = min(room, self._batch * 4)
            lines = self._reader(source).read(limit)
            if len(lines) == limit:
                unfinished.add(source[0])
            self._submit(source, lines)
            moved += len(lines)
            self._maybe_direct(source)
        self._release_finished(unfinished)
        moved += self._handed
        self._handed = 0
        if moved:
            self._recorder.kick()  # this read is the batch: no batching delay in the recorder
        return moved

    def _submit(self, source: Source, lines: list[tuple[bytes, Position]]) -> None:
        progress = self._progress.get(source[1]) if source[0] == self._own else None
        first = progress.get("first_seq") if progress is not None else 1 << 62
        for line, position in lines:
            self._recorder.submit(line)
            current = position.seq >= first
            self._pending.append((source, position, current))
            self.replayed += not current

    def _release_finished(self, unfinished: set[Path]) -> None:
        busy = {source[0] for source, _, _ in self._pending} | {s[0] for s in self._stored}
        for directory in list(self._adopted):
            if directory in unfinished or directory in busy:
                continue
            for source in [s for s in self._readers if s[0] == directory]:
                self._readers.pop(source).close()
            assert self._root is not None
            ownership.release(directory, self._root, self._adopted.pop(directory))
            log.info("recorder stored the adopted spool %s", directory.name)

    @property
    def _local_name(self) -> str | None:
        return None if self._local is None else self._local.name

    def _maybe_direct(self, source: Source) -> None:
        """Once the local writer's spool is read to its end, take its records by hand."""
        local = self._local
        if local is None or self._direct or source != (self._own, local.name):
            return
        if self._reader(source).position == local.position:
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
            source = (self._own, local.name)
            old = self._readers.get(source)
            if old is not None:
                old.close()  # its file and the segment it erases
            self._readers[source] = SpoolReader(self._own, local.name, start)
            return
        self._recorder.submit(record)
        self._pending.append(((self._own, local.name), end, True))
        self._handed += 1

    def settle(self) -> None:
        """Checkpoint what the recorder has finished with; publish progress."""
        done = self._recorder.finished - self._seen_finished
        self._seen_finished += done
        for _ in range(done):
            source, position, current = self._pending.popleft()
            self._stored[source] = position
            if current:
                self._committed[source[1]] = self._committed.get(source[1], 0) + 1
        for source, position in list(self._stored.items()):
            write_checkpoint(source[0], source[1], position)
            self._readers[source].release_before(position)
            del self._stored[source]
        self._publish()

    def _publish(self, sleeping: bool = False) -> None:
        """`sleeping` is published as the number of this sleep (0 awake): a writer pokes a
        sleeping drain once per sleep, however many records it spools meanwhile."""
        recorder = self._recorder
        totals = {
            "write_errors": recorder.write_errors_total,
            "dropped": recorder.dropped_total,
            "batches": recorder.batches_total,
            "batch_ns": int(recorder.batch_seconds_total * 1e9),
            "last_batch_ns": int(recorder.last_batch_seconds * 1e9),
            "wakeups": self._wakeups,
        }
        for index, (name, progress) in enumerate(self._progress.items()):
            values = {
                "sleeping": self._wakeups + 1 if sleeping else 0,
                "committed": self._committed.get(name, 0),
            }
            # Counters of the whole drain go on the first writer's progress.
            progress.publish({**values, **totals} if index == 0 else values)

    def flush_wanted(self) -> bool:
        """A gateway waits in flush(): write without the batching delay."""
        return any(
            self._committed.get(name, 0) < p.get("flush_wanted")
            for name, p in self._progress.items()
        )

    async def run(self, owner: Background) -> None:
        self._recorder.start(owner)
        self.adopt()
        adopted_at = time.monotonic()
        try:
            while not self._stop_requested:
                if await self._step():
                    await self._gather()
                else:
                    self._pause = 0.0
                    await self._sleep(adopted_at + self._adopt_seconds - time.monotonic())
                if time.monotonic() - adopted_at >= self._adopt_seconds:
                    self.adopt()
                    adopted_at = time.monotonic()
        finally:
            await self.stop()

    async def _step(self) -> int:
        self._refresh()
        moved = self.pull()
        if self.flush_wanted():
            with contextlib.suppress(TimeoutError):
                await self._recorder.flush(timeout=1.0)
        self.settle()
        return moved

    async def _sleep(self, seconds: float) -> None:
        """Until woken (or `seconds`); a writer pokes the wake-up pipe only while we sleep,
        so say so first and look once more for what came before."""
        self._woken.clear()
        if self._recorder.finished > self._seen_finished:
            self.settle()  # stored since the last read: checkpoint it before sleeping
        self._publish(sleeping=True)
        if self.pull():
            self._publish()
            return
        self._sleeping = True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), max(0.0, seconds))
        finally:
            self._sleeping = False
        self._wakeups += 1
        self._publish()

    async def _gather(self) -> None:
        """Records are coming: awake (writers do not poke then), let more gather before the
        next read, so a busy gateway makes no wake-up at all and each read carries many.
        The pause doubles while records keep coming, up to `gather_max`; only a flush or a
        stop ends it early."""
        self._pause = min(self._gather_max, max(GATHER_SECONDS, self._pause * 2))
        deadline = time.monotonic() + self._pause
        while not (self._stop_requested or self.flush_wanted()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), left)

    async def stop(self, timeout: float = 10.0) -> None:
        """Store what is spooled (within `timeout`); the rest waits in the spool."""
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
        for handle in self._adopted.values():
            handle.close()
        self._adopted.clear()
        for progress in self._progress.values():
            progress.close()
