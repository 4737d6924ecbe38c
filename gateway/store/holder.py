"""Who holds a SQLite store: each gateway process takes a shared advisory lock on a file
beside the database for its life; `loopwatch demo` empties a database only under the
exclusive lock, so it never deletes the store (and spool) of a gateway that is running.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import make_url

from gateway.errors import StartupError

SUFFIX = "-gateway.lock"


def lock_path(database_url: str) -> Path | None:
    """The lock file of a SQLite file store; None for PostgreSQL or an in-memory one."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database + SUFFIX)


def _open(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # no such directory, read-only: the store's own opening says why
        return None


@contextlib.contextmanager
def holding(database_url: str) -> Iterator[None]:
    """A gateway's shared hold on its store while the block runs (several may hold it)."""
    path = lock_path(database_url)
    fd = None if path is None else _open(path)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            database = str(path)[: -len(SUFFIX)]
            raise StartupError(f"database {database} is being reset by `loopwatch demo`") from None
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def held_alone(database_url: str) -> Iterator[None]:
    """The exclusive hold, for emptying the store: refused while any gateway holds it."""
    path = lock_path(database_url)
    fd = None if path is None else _open(path)
    if path is None or fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            database = str(path)[: -len(SUFFIX)]
            raise StartupError(
                f"database {database} is in use by a running loopwatch: stop it, or give "
                "the demo another --database-url"
            ) from None
        yield
    finally:
        os.close(fd)
