"""`q=` on the traces list: find first, then fetch. The ids of matching traces come from
indexed lookups alone, each bounded; the list then pages those traces with its filters.

Words of recorded text and tool names match through SQLite FTS5 (`items_fts`, kept by
gateway.store.write.fulltext, which holds call ids' words too) or PostgreSQL's stored
`items.search_words` and its GIN index (the writer's words, revision 0014); trace, step,
response, provider request and call ids match by prefix, as range seeks on their indexes
(`id >= prefix AND id < next`), which any collation serves.

On PostgreSQL the planner's statistics say how common the words are: a word in at least
COMMON_SHARE of the items (`file`, `the`) is met quickly walking the newest items, so its
newest matches are read that way; any other word, however rare, is answered by a bitmap
scan of the GIN index, every match read and the newest kept. The planner itself cannot be
left to choose: not knowing a rare word, it guesses it in up to 0.5 % of the items, and
under a LIMIT walks the newest items for it, the whole table for a word in a few.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.key_epochs import stored_epochs
from gateway.store.models import ITEMS, STEPS, TRACES
from gateway.store.write import fulltext

MAX_QUERY = 200  # characters; a longer search is cut
# Items a word search reads, newest first: a common word lists the traces of its newest
# matches instead of reading every match.
MAX_WORD_MATCHES = 2000
MAX_PREFIX_MATCHES = 2000  # rows of one id column a prefix reads
# A word in at least this share of the items is common: walking the newest items meets its
# newest matches within a few hundred thousand rows, sooner than reading all its matches
# (1M steps: a word in 0.85 % of the items, 0.9 s walked, 1.2 s read from the index). Above
# the planner's highest guess for a word it has no statistics on (0.5 %), so such a word
# always takes the GIN index.
COMMON_SHARE = 0.0075
# The stored words of an item and their GIN index: nothing is recomputed. An item stored
# since revision 0014 holds the words the writer cut (`:lexemes`, the query's words cut the
# same way, all of them); one stored before, those of to_tsvector's parser, which keeps
# paths, hosts and numbers whole: either matches.
_PG_WORDS_MATCH = (
    "items.search_words @@ (CAST(:lexemes AS tsquery) || plainto_tsquery('simple', :words))"
)
# The planner's estimate of the writer's words alone: a word it has no statistics on is
# guessed in up to 0.5 % of the items, an OR of two such guesses in up to about 1 %.
_PG_ESTIMATE = (
    "EXPLAIN (FORMAT JSON) SELECT 1 FROM items "
    "WHERE items.search_words @@ CAST(:lexemes AS tsquery)"
)
# The items as the planner counts them (its statistics scaled to the table's size now).
_PG_ITEMS = "EXPLAIN (FORMAT JSON) SELECT 1 FROM items"
# MATERIALIZED: the matches are planned for all rows (a bitmap scan of the GIN index), not
# for the first few under the LIMIT (a walk of the newest items).
_PG_GIN_NEWEST = (
    f"WITH matches AS MATERIALIZED (SELECT id, step_id FROM items WHERE {_PG_WORDS_MATCH}) "
    "SELECT step_id FROM matches ORDER BY id DESC LIMIT :matches"
)
_PG_WALK_NEWEST = (
    f"SELECT step_id FROM items WHERE {_PG_WORDS_MATCH} ORDER BY id DESC LIMIT :matches"
)


def tokens(text: str) -> list[str]:
    """The words of `text` as FTS5's unicode61 tokenizer cuts them: runs of letters, digits
    and private-use characters. Each is one FTS5 term, never a phrase."""
    found: list[str] = []
    current: list[str] = []
    for char in text[:MAX_QUERY]:
        category = unicodedata.category(char)
        if category[0] in "LN" or category == "Co":
            current.append(char)
        elif current:
            found.append("".join(current))
            current = []
    if current:
        found.append("".join(current))
    return found


def fts5_query(text: str) -> str | None:
    """Every word of `text` as a quoted FTS5 term (all must match), or None without words.

    Quoting keeps a user's `*`, `-`, `NEAR` or `AND` from being read as FTS5 syntax.
    """
    return " ".join(f'"{word}"' for word in tokens(text)) or None


def next_prefix(prefix: str) -> str:
    """The smallest string above every string that starts with `prefix` (code point order)."""
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates cannot be stored: skip to the next character
        last = 0xE000
    if last > 0x10FFFF:
        return next_prefix(prefix[:-1]) if len(prefix) > 1 else prefix + "\U0010ffff"
    return prefix[:-1] + chr(last)


def prefix_condition(column: Any, prefix: str) -> Any:
    """`column` starts with `prefix`, as a range an index seeks; the exact test after it
    keeps a collation that orders other strings inside the range from matching."""
    return sa.and_(
        column >= prefix,
        column < next_prefix(prefix),
        sa.func.substr(column, 1, len(prefix)) == prefix,
    )


def matching_trace_ids(conn: Connection, text: str) -> set[str]:
    """Traces holding every word of `text`, or an id starting with it: at most a few
    thousand, each found through an index."""
    text = text.strip()[:MAX_QUERY]
    if not text:
        return set()
    return _by_words(conn, text) | set(conn.scalars(_by_prefix(text, stored_epochs(conn))))


def _by_prefix(text: str, epochs: list[int]) -> sa.CompoundSelect[str]:
    """One statement: each id column's range seek (one an epoch for the keys behind the key
    epoch), bounded, as a branch of a union."""
    s, i = STEPS.c, ITEMS.c
    calls = sa.select(i.step_id).where(i.key_epoch.in_(epochs), prefix_condition(i.call_id, text))
    answered = (s.response_id, s.provider_request_id)
    branches = [
        sa.select(TRACES.c.id.label("trace_id")).where(prefix_condition(TRACES.c.id, text)),
        sa.select(s.trace_id).where(prefix_condition(s.id, text)),
        *(
            sa.select(s.trace_id).where(s.key_epoch.in_(epochs), prefix_condition(column, text))
            for column in answered
        ),
        sa.select(s.trace_id).where(s.id.in_(calls.limit(MAX_PREFIX_MATCHES).scalar_subquery())),
    ]
    # Each branch its own subquery: SQLite takes no LIMIT on a member of a compound SELECT.
    bounded = [b.limit(MAX_PREFIX_MATCHES).subquery() for b in branches]
    return sa.union(*(sa.select(sub.c.trace_id) for sub in bounded))


def _by_words(conn: Connection, text: str) -> set[str]:
    """The traces of the newest items that hold every word of `text`."""
    if conn.dialect.name == "postgresql":
        lexemes = pg_query(text)
        if lexemes is None:
            return set()
        newest = _PG_WALK_NEWEST if _pg_common(conn, lexemes) else _PG_GIN_NEWEST
        # Reading every match of a word costs the planner enough to compile it (JIT), which
        # takes longer than the read saves.
        conn.exec_driver_sql("SET LOCAL jit = off")
        steps = sa.text(newest).bindparams(lexemes=lexemes, words=text, matches=MAX_WORD_MATCHES)
        step_ids = steps.columns(sa.column("step_id", sa.String)).scalar_subquery()
        traces = sa.select(STEPS.c.trace_id).where(STEPS.c.id.in_(step_ids))
        return set(conn.scalars(traces.distinct()))
    query = fts5_query(text)
    if query is None:
        return set()
    rowids = sa.text(
        "SELECT rowid FROM items_fts WHERE items_fts MATCH :fts_query "
        "ORDER BY rowid DESC LIMIT :matches"
    ).bindparams(fts_query=query, matches=MAX_WORD_MATCHES)
    steps_of = sa.select(ITEMS.c.step_id).where(
        ITEMS.c.id.in_(rowids.columns(sa.column("rowid", sa.Integer)).scalar_subquery())
    )
    traces_of = sa.select(STEPS.c.trace_id).where(STEPS.c.id.in_(steps_of.scalar_subquery()))
    return set(conn.scalars(traces_of.distinct()))


def pg_query(text: str) -> str | None:
    """Every word of `text` as the writer stores it, all required, in tsquery's input form;
    None without words."""
    found = fulltext.words(text)
    return " & ".join(f"'{word}'" for word in found) if found else None


def _pg_common(conn: Connection, lexemes: str) -> bool:
    """Whether the planner's statistics put every word of `lexemes` together in at least
    COMMON_SHARE of the items (an estimate: no row is read)."""
    matches = _planned_rows(conn, sa.text(_PG_ESTIMATE).bindparams(lexemes=lexemes))
    return matches >= COMMON_SHARE * _planned_rows(conn, sa.text(_PG_ITEMS))


def _planned_rows(conn: Connection, explain: sa.TextClause) -> float:
    plan = conn.scalar(explain)
    return float(plan[0]["Plan"]["Plan Rows"])
