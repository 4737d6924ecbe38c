"""What each step's request declared and asked for: its tools (stored once per distinct
list, by content hash) and its parameters.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Steps recorded before this revision have neither: they read as not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_sets",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("tools", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("hash"),
    )
    # Plain ADD COLUMN (see 0002): no copy-and-rename of a table with foreign keys.
    op.add_column("steps", sa.Column("tool_set", sa.String(length=64), nullable=True))
    op.add_column("steps", sa.Column("params", sa.JSON(), nullable=True))
    op.create_index("ix_steps_tool_set", "steps", ["tool_set"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
