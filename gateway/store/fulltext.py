"""Keeps SQLite's full-text index of items (`items_fts`, revision 0006) in step with the
items table: one statement a batch when steps are written, one when they are purged.

`items_fts` is an external-content FTS5 table over `items` (no copy of the text), so it
changes only through these calls, never by triggers. PostgreSQL needs neither: an item's
words are a generated column (`search_words`) computed with the row it belongs to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.models import ITEMS

# The FTS5 table as SQLAlchemy needs it for INSERT … SELECT; `items_fts` is its command column.
_FTS = sa.table(
    "items_fts",
    *(sa.column(name) for name in ("items_fts", "rowid", "text", "tool_name", "call_id")),
)
_INDEXED = ("rowid", "text", "tool_name", "call_id")


def index_steps(conn: Connection, step_ids: Sequence[str]) -> None:
    """Index the words of these newly inserted steps' items (in the writing transaction)."""
    if conn.dialect.name != "sqlite" or not step_ids:
        return
    # At the driver (SQLite's qmark): no statement compiled per batch.
    conn.exec_driver_sql(
        "INSERT INTO items_fts (rowid, text, tool_name, call_id) "
        "SELECT id, text, tool_name, call_id FROM items "
        f"WHERE step_id IN ({', '.join('?' * len(step_ids))})",
        tuple(step_ids),
    )


def forget_steps(conn: Connection, steps: sa.Select[Any] | Sequence[str]) -> None:
    """Take the items of `steps` out of the index; call before deleting them, in the same
    transaction (FTS5 removes a row by the values it indexed, read from the row here)."""
    if conn.dialect.name != "sqlite":
        return
    i = ITEMS.c
    rows = sa.select(sa.literal("delete"), i.id, i.text, i.tool_name, i.call_id).where(
        i.step_id.in_(steps)
    )
    conn.execute(sa.insert(_FTS).from_select(("items_fts", *_INDEXED), rows))
