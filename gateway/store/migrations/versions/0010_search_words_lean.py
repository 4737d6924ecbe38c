"""PostgreSQL's words of an item without its call id.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

`items.search_words` (revision 0006) held the words of an item's call id too: one distinct
word a call, so the GIN index took an entry for each and every write inserted it at a random
place of the index. A call id is found by prefix through `ix_items_call_id_kind` (search.py),
whole or by its start, so the stored words are now the text and the tool name alone. A
generated column's expression cannot change in place: the column and its index are made
again, for the stored items too (the table is rewritten once).

The rewrite and the index build take minutes on a large store (about 3 minutes for 200k
steps on a loaded 2-CPU machine), once, at the first start-up of this version.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WORDS = "strip(to_tsvector('simple', coalesce(text, '') || ' ' || coalesce(tool_name, '')))"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":  # SQLite is unchanged
        return
    op.execute("ALTER TABLE items DROP COLUMN IF EXISTS search_words")  # and its GIN index
    op.execute(
        f"ALTER TABLE items ADD COLUMN search_words tsvector GENERATED ALWAYS AS ({_WORDS}) STORED"
    )
    op.execute("SET LOCAL maintenance_work_mem = '256MB'")  # the GIN build, in fewer passes
    op.execute("CREATE INDEX ix_items_search_words ON items USING gin (search_words)")


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
