"""Search: SQLite's full-text index kept by the writer a batch at a time, without triggers.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

SQLite: `items_fts` is rebuilt as an external-content FTS5 table over `items` that keeps
only which rows hold each word (`detail=none`: no positions, about half the size); search
terms are single words, all of which must match. It is filled from the stored items here;
the per-row triggers of revision 0002 go, as the writer and the purge update the index in
the statements of each batch. PostgreSQL keeps revision 0002's GIN expression index, which
follows the rows by itself.
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


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in SEARCH_SQLITE:
            op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
