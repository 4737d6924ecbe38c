"""Counters a spool writer shares with the drain that stores it, in a small mmap'd file, and
the wake-up pipe (a FIFO beside the spool) a writer pokes when the drain sleeps.

Each field has one writing process. Cells are read and written as whole aligned 8-byte words
(one load or store, never torn); the drain's fields also sit under a sequence counter, so a
reader sees them all from one publication (a seqlock).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from pathlib import Path

GATEWAY_FIELDS = (
    "first_seq",  # the first segment of this run
    "flush_wanted",  # a line count the gateway waits for (no batching delay meanwhile)
)
DRAIN_FIELDS = (
    "sleeping",  # while the drain waits for a wake-up, the number of that sleep (else 0):
    # a writer pokes the FIFO once per sleep
    "committed",  # lines of this run stored or given up on
    "dropped",  # records given up on (unwritable, unredactable, undecodable)
    "write_errors",
    "batches",
    "batch_ns",  # total time of those batches
    "last_batch_ns",
    "wakeups",  # times the drain woke to read the spool
)
_SEQUENCE = len(GATEWAY_FIELDS)  # the seqlock word, before the drain's fields
_INDEX = {
    **{name: i for i, name in enumerate(GATEWAY_FIELDS)},
    **{name: _SEQUENCE + 1 + i for i, name in enumerate(DRAIN_FIELDS)},
}
_WORDS = _SEQUENCE + 1 + len(DRAIN_FIELDS)
_SIZE = _WORDS * 8
WAKE_FIFO = "wake.fifo"


class Progress:
    """The shared counters of one spool writer, in `<name>.progress`."""

    def __init__(self, path: Path, *, create: bool) -> None:
        if create:  # a new file (new inode): a drain of an earlier run cannot write into it
            temporary = path.with_suffix(".progress.tmp")
            temporary.write_bytes(bytes(_SIZE))
            os.chmod(temporary, 0o600)
            os.replace(temporary, path)
        with path.open("r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), _SIZE)
        # A native 'q' view: each item access is one aligned 8-byte load or store.
        self._cells = memoryview(self._map).cast("q")

    def get(self, field: str) -> int:
        return int(self._cells[_INDEX[field]])

    def set(self, field: str, value: int) -> None:
        """For the gateway's fields; the drain publishes its own with `publish`."""
        self._cells[_INDEX[field]] = value

    def publish(self, values: dict[str, int]) -> None:
        """The drain's fields, all at once: the sequence is odd while they change."""
        cells = self._cells
        cells[_SEQUENCE] += 1
        for field, value in values.items():
            cells[_INDEX[field]] = value
        cells[_SEQUENCE] += 1

    def snapshot(self) -> dict[str, int]:
        """The drain's fields from one publication (retried while one is under way)."""
        cells = self._cells
        while True:
            before = cells[_SEQUENCE]
            if before % 2 == 0:
                values = {field: int(cells[_INDEX[field]]) for field in DRAIN_FIELDS}
                if cells[_SEQUENCE] == before:
                    return values
            os.sched_yield()

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._cells.release()
            self._map.close()


def progress_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.progress"


def make_fifo(directory: Path) -> Path:
    path = directory / WAKE_FIFO
    with contextlib.suppress(FileExistsError):
        os.mkfifo(path, 0o600)
    return path


def open_fifo_reader(directory: Path) -> int:
    """The drain's end. Read-write, so opening never blocks and it never reads end-of-file."""
    return os.open(make_fifo(directory), os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)


def empty_fifo(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass


class Waker:
    """A writer's end: one byte into the FIFO, once per sleep of the drain (a record spooled
    while the drain is awake, or after this sleep was poked, is found by its next read; no
    system call for it: a poke costs a switch to the recorder process)."""

    def __init__(self, directory: Path, progress: Progress) -> None:
        self._path = directory / WAKE_FIFO
        self._progress = progress
        self._fd: int | None = None
        self._poked = 0  # the sleep last poked

    def __call__(self, always: bool = False) -> None:
        sleep = self._progress.get("sleeping")
        if not always and (not sleep or sleep == self._poked):
            return
        self._poked = sleep
        try:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.write(self._fd, b"w")
        except OSError as exc:
            # No drain is reading (ENXIO, EPIPE; it reads the spool when it starts) or the
            # pipe is full of wake-ups already (EAGAIN).
            if exc.errno != errno.EAGAIN:
                self.close()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
