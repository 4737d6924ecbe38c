"""The spool: append-only files of records, written on the hot path before a client has its
answer, read by the recorder, so a record survives a crash (even SIGKILL) of the gateway.

Each writer (one per gateway process) appends whole lines to its own segment files,
`<name>-<seq>.spool`, mode 0600; it never reopens an old segment, so a line torn by a crash
stays the last of its file. The reader keeps a checkpoint per writer of what is stored,
and erases what is before it (recording.erase): spooled text is unredacted.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.recording.erase import Eraser

SEGMENT_BYTES = 32 * 1024 * 1024
_SEGMENT = re.compile(r"^(?P<name>[A-Za-z0-9_]+)-(?P<seq>\d{12})\.spool$")


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """A place in one writer's spool: segment number, then byte offset in it."""

    seq: int
    offset: int


def segment_path(directory: Path, name: str, seq: int) -> Path:
    return directory / f"{name}-{seq:012d}.spool"


def segments(directory: Path, name: str) -> list[int]:
    """The segment numbers of a writer present on disk, oldest first."""
    found = []
    for entry in os.scandir(directory):
        match = _SEGMENT.match(entry.name)
        if match and match["name"] == name:
            found.append(int(match["seq"]))
    return sorted(found)


def writer_names(directory: Path) -> list[str]:
    names = {m["name"] for e in os.scandir(directory) if (m := _SEGMENT.match(e.name))}
    return sorted(names)


def ensure_directory(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


class SpoolWriter:
    """Appends lines; each `append` is one write(2), done when it returns (the kernel has
    the bytes: they survive the process, if not the machine)."""

    def __init__(self, directory: Path, name: str, segment_bytes: int = SEGMENT_BYTES):
        ensure_directory(directory)
        self._directory = directory
        self._name = name
        self._segment_bytes = segment_bytes
        existing = segments(directory, name)
        self._seq = (existing[-1] + 1) if existing else 1
        self.first_seq = self._seq
        self._fd = self._open(self._seq)
        self._offset = 0
        self.lines = 0  # appended by this writer

    def _open(self, seq: int) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(segment_path(self._directory, self._name, seq), flags, 0o600)
        os.fchmod(fd, 0o600)  # whatever the umask: spooled text is for the recorder only
        return fd

    @property
    def name(self) -> str:
        return self._name

    @property
    def position(self) -> Position:
        """Where the next line goes: everything before it has been appended."""
        return Position(self._seq, self._offset)

    def append(self, line: bytes) -> None:
        if self._offset >= self._segment_bytes:
            self._rotate()
        view = memoryview(line)
        while view:  # a regular file takes it whole; loop for the rare short write
            written = os.write(self._fd, view)
            view = view[written:]
        self._offset += len(line)
        self.lines += 1

    def _rotate(self) -> None:
        os.close(self._fd)
        self._seq += 1
        self._fd = self._open(self._seq)
        self._offset = 0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class SpoolReader:
    """Reads one writer's complete lines from a position on, segment after segment, like
    `tail -f`: a line without its newline yet is left for the next read."""

    def __init__(self, directory: Path, name: str, start: Position) -> None:
        self._directory = directory
        self._name = name
        self.position = start  # right after the last line handed out
        self._buf = b""
        self._at = 0  # start of the unconsumed part of _buf
        self._file: io.FileIO | None = None
        self._released_before = 0  # segments before this one are deleted already
        self._eraser = Eraser()

    def read(self, limit: int) -> list[tuple[bytes, Position]]:
        """Up to `limit` complete lines, each with the position right after it."""
        out: list[tuple[bytes, Position]] = []
        while len(out) < limit:
            end = self._buf.find(b"\n", self._at)
            if end >= 0:
                seq, offset = self.position.seq, self.position.offset + end + 1 - self._at
                line = self._buf[self._at : end]
                if line[:1] == b"\0":  # after erased records (JSON lines hold no NUL)
                    line = line.lstrip(b"\0")
                out.append((line, Position(seq, offset)))
                self.position, self._at = Position(seq, offset), end + 1
            elif not (self._fill() or self._next_segment()):
                break
        return out

    def _fill(self) -> bool:
        if self._file is None:
            path = segment_path(self._directory, self._name, self.position.seq)
            try:
                self._file = io.FileIO(path, "r")
            except FileNotFoundError:
                return False
            self._file.seek(self.position.offset)
            self._buf, self._at = b"", 0
        data = self._file.read(1 << 20)
        if not data:
            return False
        self._buf = self._buf[self._at :] + data
        self._at = 0
        return True

    def _next_segment(self) -> bool:
        newer = [s for s in segments(self._directory, self._name) if s > self.position.seq]
        if not newer:
            return False
        # The writer moved on, so this segment is final: read to its end once more (it may
        # have been appended to since our last read), then what has no newline is a line
        # torn by a crash, skipped.
        while self._fill():
            if self._buf.find(b"\n", self._at) >= 0:
                return True
        if self._file is not None:
            self._file.close()
            self._file = None
        self.position, self._buf, self._at = Position(newer[0], 0), b"", 0
        return True

    def release_before(self, position: Position) -> None:
        """Everything before `position` is stored: delete the segments wholly before it
        (the directory is listed only when a segment was finished since the last call) and
        erase the stored part of its own."""
        if position.seq > self._released_before:
            self._released_before = position.seq
            for seq in segments(self._directory, self._name):
                if seq < position.seq:
                    with contextlib.suppress(FileNotFoundError):
                        segment_path(self._directory, self._name, seq).unlink()
        path = segment_path(self._directory, self._name, position.seq)
        self._eraser.erase_before(path, position.offset)

    def close(self) -> None:
        self._eraser.close()
        if self._file is not None:
            self._file.close()
            self._file = None


def read_checkpoint(directory: Path, name: str) -> Position | None:
    try:
        text = (directory / f"{name}.checkpoint").read_text()
        seq, offset = text.split()
        return Position(int(seq), int(offset))
    except (FileNotFoundError, ValueError):
        return None


def write_checkpoint(directory: Path, name: str, position: Position) -> None:
    """Atomically: a crash leaves the old checkpoint or the new one, never half of one."""
    path = f"{directory}/{name}.checkpoint"
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"{position.seq} {position.offset}\n".encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)
