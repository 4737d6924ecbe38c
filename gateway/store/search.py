"""`q=` on the traces list: recorded text, tool names and call ids by their words (SQLite FTS5,
PostgreSQL full-text), and trace, step, response, request and call ids by prefix.

Every branch is an indexed lookup: the FTS5 table or the GIN index (revision 0002), and the
primary keys and id indexes for prefixes.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from gateway.store.models import ITEMS, STEPS, TRACES

MAX_QUERY = 200  # characters; a longer search is cut
_WORD = re.compile(r"\w+", re.UNICODE)
# The expression revision 0002 indexes on PostgreSQL, so the planner uses it.
_PG_DOCUMENT = sa.func.to_tsvector(
    sa.literal_column("'simple'"),
    sa.func.coalesce(ITEMS.c.text, "")
    + " "
    + sa.func.coalesce(ITEMS.c.tool_name, "")
    + " "
    + sa.func.coalesce(ITEMS.c.call_id, ""),
)


def fts5_query(text: str) -> str | None:
    """Every word of `text` as a quoted FTS5 term (all must match), or None without words.

    Quoting keeps a user's `"`, `*`, `-` or `NEAR` from being read as FTS5 syntax.
    """
    words = _WORD.findall(text[:MAX_QUERY])
    return " ".join(f'"{word}"' for word in words) or None


def _prefix(column: Any, text: str) -> Any:
    return column.startswith(text, autoescape=True)


def matches(text: str, dialect: str) -> Any:
    """A condition on TRACES: the trace holds `text` as words, or an id starting with it."""
    text = text.strip()[:MAX_QUERY]
    s, i = STEPS.c, ITEMS.c
    by_id = sa.or_(
        _prefix(TRACES.c.id, text),
        sa.exists().where(
            s.trace_id == TRACES.c.id,
            sa.or_(
                _prefix(s.id, text),
                _prefix(s.response_id, text),
                s.provider_request_id == text,
            ),
        ),
        sa.exists().where(s.trace_id == TRACES.c.id, i.step_id == s.id, _prefix(i.call_id, text)),
    )
    words = _words(text, dialect)
    return by_id if words is None else sa.or_(by_id, TRACES.c.id.in_(words))


def _words(text: str, dialect: str) -> Any:
    """The ids of traces whose items hold every word of `text`, or None without words."""
    if dialect == "postgresql":
        if not _WORD.search(text):
            return None
        matched = _PG_DOCUMENT.op("@@")(
            sa.func.plainto_tsquery(sa.literal_column("'simple'"), text)
        )
        return sa.select(STEPS.c.trace_id).join(ITEMS, ITEMS.c.step_id == STEPS.c.id).where(matched)
    query = fts5_query(text)
    if query is None:
        return None
    fts = sa.table("items_fts", sa.column("rowid"))
    rowids = (
        sa.select(fts.c.rowid).where(sa.text("items_fts MATCH :fts_query")).params(fts_query=query)
    )
    return (
        sa.select(STEPS.c.trace_id)
        .join(ITEMS, ITEMS.c.step_id == STEPS.c.id)
        .where(ITEMS.c.id.in_(rowids))
    )
