"""Runs made from another run's record: a replay's original trace and the step it diverged
at, a fork's original trace and step.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04

Nullable columns (plain ALTER TABLE ADD COLUMN, no rewrite) and indexes on the two links, so
a trace's page finds its replays and forks.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("traces", sa.Column("replay_of", sa.String(128), nullable=True))
    op.add_column("traces", sa.Column("diverged_at", sa.Integer(), nullable=True))
    op.add_column("traces", sa.Column("fork_of", sa.String(128), nullable=True))
    op.add_column("traces", sa.Column("fork_at", sa.Integer(), nullable=True))
    op.create_index("ix_traces_replay_of", "traces", ["replay_of"])
    op.create_index("ix_traces_fork_of", "traces", ["fork_of"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
