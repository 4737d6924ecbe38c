"""Only the indexes a query uses: every write pays for each one.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Dropped: `ix_steps_trace_id` (the unique (trace_id, seq) index answers every lookup by
trace) and `ix_steps_model_trace` (no query reads steps by model: the list filters on the
trace's own model list). `ix_items_call_id` becomes one over (call_id, direction, kind) for
the items that have a call id: the emitted-call lookups and the key filter's walk at
start-up are answered from the index alone, and items without a call id (most of them)
are no longer in it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HAS_CALL_ID = sa.text("call_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_steps_trace_id", table_name="steps", if_exists=True)
    op.drop_index("ix_steps_model_trace", table_name="steps", if_exists=True)
    op.create_index(
        "ix_items_call_id_kind",
        "items",
        ["call_id", "direction", "kind"],
        sqlite_where=HAS_CALL_ID,
        postgresql_where=HAS_CALL_ID,
    )
    op.drop_index("ix_items_call_id", table_name="items", if_exists=True)


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
