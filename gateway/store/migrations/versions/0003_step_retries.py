"""Retries: a step names the failed attempt it repeats.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Existing steps are no retries (null).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE ADD COLUMN, as in 0002: no copy-and-rename on SQLite.
    op.add_column("steps", sa.Column("retry_of", sa.String(length=128), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
