"""A trace's placement time, copied onto its steps, items and violations: the key of
PostgreSQL's opt-in time partitions (`loopwatch store partition`, gateway.store.partitions.convert).

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-01

Nullable columns only: no table is rewritten, so the upgrade takes moments on any store. The
writer fills them for new traces on PostgreSQL; old rows stay null until a conversion places
them. SQLite leaves them null.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("traces", "steps", "items", "violations"):
        op.add_column(table, sa.Column("placed_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
