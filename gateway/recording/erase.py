"""Erasing stored records from a spool segment: spooled text is unredacted, so once a record
is stored its bytes are punched out of the file (they read back as zeros, their blocks are
freed) instead of waiting for the segment to be finished and deleted.

Offsets are kept: the writer appends past them and readers count them as before. Where the
file system cannot punch holes, the range is overwritten with zeros.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (linux/falloc.h): the size stays, so the
# writer's offsets and the readers' positions are unchanged.
_PUNCH_HOLE = 0x02 | 0x01
_ZEROS = bytes(1 << 20)
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}

Fallocate = Callable[[int, int, int, int], int]


def _libc_fallocate() -> Fallocate | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):  # not Linux: zeros are written instead
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    punch: Fallocate = function
    return punch


_fallocate = _libc_fallocate()


class Eraser:
    """Erases the stored prefix of one writer's current segment as the checkpoint moves on;
    a segment it has not seen yet is erased from its start (a drain that stopped between
    its checkpoint and its erasure left it)."""

    def __init__(self, *, punch: bool = True) -> None:
        self._path: Path | None = None
        self._fd: int | None = None
        self._done = 0  # bytes of the open segment erased
        self._punch = punch and _fallocate is not None

    def erase_before(self, path: Path, offset: int) -> None:
        """Erase bytes [0, offset) of the segment at `path`; what is done is not done again."""
        if path != self._path:
            self.close()
            try:
                self._fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return
            self._path, self._done = path, 0
        if self._fd is None or offset <= self._done:
            return
        try:
            self._erase(self._fd, self._done, offset - self._done)
        except OSError as exc:  # the record is stored: a failure only leaves its text longer
            log.warning("erasing stored records from the spool failed: %s", exc)
            return
        self._done = offset

    def _erase(self, fd: int, start: int, length: int) -> None:
        if self._punch and _fallocate is not None:
            if _fallocate(fd, _PUNCH_HOLE, start, length) == 0:
                return
            code = ctypes.get_errno()
            if code not in _UNSUPPORTED:
                raise OSError(code, os.strerror(code))
            self._punch = False
        # Never O_APPEND: pwrite must land at the offset, below the writer's appends.
        end = start + length
        while start < end:
            start += os.pwrite(fd, _ZEROS[: min(len(_ZEROS), end - start)], start)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._path, self._done = None, None, 0
