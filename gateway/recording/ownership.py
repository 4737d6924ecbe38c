"""Who owns a spool: each gateway spools into its own directory under the spool root and
holds a shared advisory lock (flock) on its `gateway.lock` for as long as any of its
processes (gateway, workers, recorder) lives. A directory whose lock can be taken
exclusively has no live owner: a gateway on the same store adopts it, stores it, deletes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from gateway.errors import ConfigError
from gateway.recording.spool import ensure_directory, writer_names

LOCK = "gateway.lock"
# Only these are deleted from an adopted directory (the root may be shared with other files).
_SPOOL_FILES = (LOCK, "recorder.lock", "wake.fifo")
_SPOOL_SUFFIXES = (".spool", ".checkpoint", ".progress", ".checkpoint.tmp", ".progress.tmp")


def _unwritable(root: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"invalid setting spool_dir (LOOPWATCH_SPOOL_DIR): {root} is not writable: {exc}"
    )


def hold(directory: Path) -> IO[str]:
    """A shared hold on `directory`: while one is open, the directory is never adopted."""
    handle = (directory / LOCK).open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


@contextlib.contextmanager
def own(root: Path) -> Iterator[Path]:
    """A new directory of this gateway's own under `root`, held while the block runs."""
    try:
        ensure_directory(root)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        directory = root / name
        ensure_directory(directory)
        handle = hold(directory)
    except OSError as exc:
        raise _unwritable(root, exc) from None
    with handle:
        yield directory


def candidates(root: Path, own_directory: Path | None) -> list[Path]:
    """Directories that may hold another owner's spool: the root itself (a spool of a
    version that wrote there) and every other directory in it."""
    found = [root]
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        found += sorted(Path(e.path) for e in os.scandir(root) if e.is_dir())
    return [d for d in found if d != own_directory]


def try_adopt(directory: Path) -> IO[str] | None:
    """The exclusive lock of a directory whose owner is gone, or None if it lives (or the
    directory is gone, or holds no spool)."""
    try:
        if not writer_names(directory):
            return None
        handle = (directory / LOCK).open("a")
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def release(directory: Path, root: Path, handle: IO[str]) -> None:
    """An adopted directory is stored: delete what is left of it, then let go of it."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if entry.name in _SPOOL_FILES or entry.name.endswith(_SPOOL_SUFFIXES):
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(entry.path)
    if directory != root:
        with contextlib.suppress(OSError):
            directory.rmdir()
    handle.close()
