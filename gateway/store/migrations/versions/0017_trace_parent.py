"""Agents that spawn agents: a trace's parent run and call, its tree's root and its depth.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

Nullable columns and a depth defaulting to 0 (plain ALTER TABLE ADD COLUMN, no rewrite),
and indexes on the parent and the root. Traces stored before are roots: their root is null,
which the read side takes as their own id.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("traces", sa.Column("parent_trace_id", sa.String(128), nullable=True))
    op.add_column("traces", sa.Column("parent_call_id", sa.String(256), nullable=True))
    op.add_column("traces", sa.Column("root_trace_id", sa.String(128), nullable=True))
    op.add_column("traces", sa.Column("depth", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_traces_parent", "traces", ["parent_trace_id"])
    op.create_index("ix_traces_root", "traces", ["root_trace_id"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
