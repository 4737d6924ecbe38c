"""The provider-held history a step's output holds (a Responses compaction item), by its
mark: a request whose history carries that item continues the step's trace.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

A nullable column and its index, led by the key epoch like revision 0016's; steps stored
before have none (null).
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
    op.add_column("steps", sa.Column("held_state", sa.String(64), nullable=True))
    op.create_index("ix_steps_held_state", "steps", ["key_epoch", "held_state"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
