"""A step's facts of the provider's side beyond its columns: the model asked for when
another answered, a refusal's category, the requests of the tools the provider ran, its
sampling iterations, each model's usage when several ran (gateway.exchange.closing.step_attrs).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

A nullable JSON column: a plain ALTER TABLE ADD COLUMN, no rewrite; on a partitioned store
it reaches every partition of `steps`. Steps stored before have none (null).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("steps", sa.Column("attrs", sa.JSON(), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
