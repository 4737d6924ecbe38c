"""The provider-side conversation a step belongs to (Responses `conversation`): a request
naming it continues the trace of the conversation's newest step.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

A nullable column (a plain ALTER TABLE ADD COLUMN, no rewrite) and its index, led by the key
epoch like the other indexes on random ids (revision 0013); on a partitioned store both
reach every partition of `steps`. Steps stored before have none (null).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("steps", sa.Column("conversation_id", sa.String(256), nullable=True))
    op.create_index("ix_steps_conversation_id", "steps", ["key_epoch", "conversation_id"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
