"""MCP joins across processes: a model tool call's arguments key, and method calls by time.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

`items.args_key` (a hash of a tool call's canonical arguments) lets a gateway process find
the model call an MCP `tools/call` executes when another process recorded it; existing items
keep none (they join in memory only, as before). `mcp_methods` by server and start time: a
replayed spool stores each method call once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


HAS_ARGS_KEY = sa.text("args_key IS NOT NULL")


def upgrade() -> None:
    # Plain ALTER TABLE ADD COLUMN, as in 0002: no copy-and-rename on SQLite.
    op.add_column("items", sa.Column("args_key", sa.String(length=32), nullable=True))
    op.create_index(
        "ix_items_args_key",
        "items",
        ["args_key"],
        sqlite_where=HAS_ARGS_KEY,
        postgresql_where=HAS_ARGS_KEY,
    )
    op.create_index("ix_mcp_methods_server_started", "mcp_methods", ["server", "started_at"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
