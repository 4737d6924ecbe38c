"""Search without per-row work: SQLite's full-text index kept by the writer a batch at a
time, PostgreSQL's words of an item stored once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

SQLite: `items_fts` is rebuilt as an external-content FTS5 table over `items` that keeps
only which rows hold each word (`detail=none`: no positions, about half the size); search
terms are single words, all of which must match. It is filled from the stored items here;
the per-row triggers of revision 0002 go, as the writer and the purge update the index in
the statements of each batch.
PostgreSQL: each item's words are a stored generated column (`search_words`, the `simple`
configuration's lexemes without positions) with a GIN index, replacing revision 0002's
expression index, so a search never recomputes `to_tsvector` row by row; adding the column
computes it for the stored items.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEARCH_SQLITE = (
    "DROP TRIGGER IF EXISTS items_fts_insert",
    "DROP TRIGGER IF EXISTS items_fts_delete",
    "DROP TABLE IF EXISTS items_fts",
    "CREATE VIRTUAL TABLE items_fts USING fts5(text, tool_name, call_id, content='items', "
    "content_rowid='id', tokenize='unicode61', detail=none)",
    "INSERT INTO items_fts(items_fts) VALUES ('rebuild')",
)
SEARCH_POSTGRES = (
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS search_words tsvector GENERATED ALWAYS AS "
    "(strip(to_tsvector('simple', coalesce(text, '') || ' ' || coalesce(tool_name, '') "
    "|| ' ' || coalesce(call_id, '')))) STORED",
    "CREATE INDEX IF NOT EXISTS ix_items_search_words ON items USING gin (search_words)",
    "DROP INDEX IF EXISTS ix_items_search",
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in SEARCH_SQLITE if sqlite else SEARCH_POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
