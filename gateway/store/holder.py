"""Who holds a SQLite store: an advisory lock (flock) on a file beside the database, held
for the process's life and released by the OS however it ends. A gateway counting budgets in
its memory holds it alone, so no other gateway can spend the same budgets unseen; processes
counting in the ledger file (`serve --workers N`) share it; `loopwatch demo` empties a
database only under the exclusive lock, so never the store (and spool) of a running gateway.
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
def holding(database_url: str, *, alone: bool) -> Iterator[None]:
    """A gateway's hold on its store while the block runs: `alone` for one whose budget
    counts live in its memory, else shared with the other processes counting in the file."""
    path = lock_path(database_url)
    fd = None if path is None else _open(path)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if alone else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            database = str(path)[: -len(SUFFIX)]
            raise StartupError(
                f"database {database} is in use by another loopwatch gateway: one gateway per "
                "SQLite file (`serve --workers N` for more processes); run several gateways "
                "on PostgreSQL"
            ) from None
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
