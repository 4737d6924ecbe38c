"""The background responses whose step is open, shared by every gateway on the store, so the
exchange that sees a response's end ends its step whichever gateway created it.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

A new table of its own, small (a row a response in progress), nothing else touched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def upgrade() -> None:
    op.create_table(
        "open_responses",
        sa.Column("response_id", sa.String(length=256), primary_key=True),
        sa.Column("trace_id", sa.String(length=ID), nullable=False),
        sa.Column("step_id", sa.String(length=ID), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("step", sa.Text, nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
