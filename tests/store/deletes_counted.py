"""How many rows each committed transaction deleted from some tables, for retention tests
that hold a transaction's deletes to a bound."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


@contextmanager
def deletes_per_transaction(engine: Engine, prefix: str) -> Iterator[list[int]]:
    """While open, the list yielded gets, at each commit on `engine`, the rows the
    transaction's statements starting with `prefix` (`DELETE FROM steps`, say) deleted."""
    committed: list[int] = []
    pending = [0]

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith(prefix):
            pending[0] += cursor.rowcount

    def commit(conn: Any) -> None:
        committed.append(pending[0])
        pending[0] = 0

    listeners: list[tuple[str, Callable[..., None]]] = [
        ("after_cursor_execute", count),
        ("commit", commit),
    ]
    for name, listener in listeners:
        sa.event.listen(engine, name, listener)
    try:
        yield committed
    finally:
        for name, listener in listeners:
            sa.event.remove(engine, name, listener)
