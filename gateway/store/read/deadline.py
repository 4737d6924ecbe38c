"""A time limit on the statements of one read, so a search never holds a connection long.

PostgreSQL cancels a statement past `statement_timeout` (set for the transaction only);
SQLite interrupts one from its progress handler once the deadline has passed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

_QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement cancelled by its timeout
_SQLITE_CHECK_EVERY = 1000  # virtual machine instructions between two looks at the clock


class ReadTimedOut(Exception):
    """The read did not finish within its time limit."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the search took longer than {seconds:g} s and was stopped")
        self.seconds = seconds


@contextmanager
def time_limit(conn: Connection, seconds: float) -> Iterator[None]:
    """Statements run inside stop after `seconds` from entry: ReadTimedOut. `conn` must be
    in a transaction (PostgreSQL's setting lasts until it ends)."""
    deadline = time.monotonic() + seconds
    if conn.dialect.name == "postgresql":
        milliseconds = max(1, int(seconds * 1000))
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
        try:
            yield
        except sa_exc.OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED:
                raise ReadTimedOut(seconds) from None
            raise
        return
    driver: Any = conn.connection.dbapi_connection
    driver.set_progress_handler(lambda: time.monotonic() > deadline, _SQLITE_CHECK_EVERY)
    try:
        yield
    except sa_exc.OperationalError as exc:
        if "interrupted" in str(exc.orig):
            raise ReadTimedOut(seconds) from None
        raise
    finally:
        driver.set_progress_handler(None, 0)
