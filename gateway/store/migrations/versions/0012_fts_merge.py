"""Full-text upkeep that stays flat: SQLite's `items_fts` merges its segments less often.

Revision ID: 0012
Revises: 0009
Create Date: 2026-12-01

Each batch adds one segment to `items_fts`; FTS5 merges segments once `automerge` of them
share a level, so every indexed word is rewritten about log_automerge(batches) times, a
cost that grows with the store. With 16 instead of 4 a word is rewritten half as often
(at 200k steps the writer did 7 to 10 % more steps a CPU-second); a search reads up to 15
segments a level instead of 3, each a short list of rows (`detail=none`). `crisismerge`
goes from 16 to 32 so that the merges stay incremental, a little every batch, instead of
a whole level at once in one batch. Both are settings FTS5 keeps in the table itself.
PostgreSQL has no such index: nothing to do there.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FTS_MERGE_SQLITE = (
    "INSERT INTO items_fts(items_fts, rank) VALUES ('automerge', 16)",
    "INSERT INTO items_fts(items_fts, rank) VALUES ('crisismerge', 32)",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in FTS_MERGE_SQLITE:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
