"""Keeps the full-text index of items in step with the items table.

SQLite: `items_fts` (revision 0006), an external-content FTS5 table over `items` (no copy
of the text), changes only through these calls, never by triggers: one statement a batch
when steps are written, one when they are purged. PostgreSQL: each item row carries its
words (`search_words`, a tsvector with a GIN index), cut here before the row is written
(revision 0014): the server's `to_tsvector` parser cost about 39 µs of its CPU an item,
cutting them here about 12 of the writer's and reading them 3 of the server's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
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

# A word: a run of letters and digits (any script), as FTS5's unicode61 tokenizer cuts one;
# stored and looked up lowercased. ASCII text, most of it, takes the narrower pattern. A
# tsvector's lexeme holds at most 2,047 bytes: a longer run is cut in words of 511
# characters (2,047 ASCII ones), whatever their case, where and when it is stored and
# looked up alike (to_tsvector left such words out).
_WORD = re.compile(r"[^\W_]{1,511}")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]{1,2047}")
# All lexemes of a tsvector together stay under 1 MiB: to_tsvector failed such a row, and
# so the whole batch; here the words past it are left out.
_MAX_LEXEMES = (1 << 20) - 1


# ASCII text short enough that no run needs cutting, as bytes: every byte but a letter or a
# digit to a space, letters lowercased (half the time of the pattern's cut).
_ASCII_TO_WORDS = bytes(
    byte + 32 if 65 <= byte <= 90 else byte if 48 <= byte <= 57 or 97 <= byte <= 122 else 32
    for byte in range(256)
)


def _lowered(text: str) -> str:
    """The distinct words of `text`, lowercased after the cut (a letter whose lowercase
    takes a mark stays one word), space-separated; the same word may come twice."""
    ascii_text = text.isascii()
    if ascii_text and len(text) <= 2047:
        return b" ".join(set(text.encode().translate(_ASCII_TO_WORDS).split())).decode()
    found = (_ASCII_WORD if ascii_text else _WORD).findall(text)
    return " ".join(set(found)).lower()


def words(text: str) -> list[str]:
    """The distinct words of `text` as PostgreSQL's stored words hold them, in order."""
    found = (_ASCII_WORD if text.isascii() else _WORD).findall(text)
    return list(dict.fromkeys(" ".join(found).lower().split()))


def pg_words(texts: Iterable[str | None]) -> str:
    """The words of an item's texts in tsvector's input form: bare lexemes (letters and
    digits need no quoting; the server sorts them and drops repeats)."""
    text = " ".join(text for text in texts if text)
    joined = _lowered(text)
    if len(joined) * 4 <= _MAX_LEXEMES:
        return joined
    kept, total = [], 0
    for word in words(text):  # the first ones, in order
        total += len(word.encode()) + 1
        if total > _MAX_LEXEMES:
            break
        kept.append(word)
    return " ".join(kept)


def add_pg_words(items: list[dict[str, Any]]) -> None:
    """Give each new item row its stored words (`search_words`), from its text and tool
    name: PostgreSQL from revision 0014 on (gateway.store.write.layout); SQLite indexes them after
    the insert (`index_steps`)."""
    for item in items:
        item["search_words"] = pg_words((item["text"], item["tool_name"]))


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
