"""MCP: tool executions, other MCP methods, each server's tool list, MCP-side violations.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

New tables only; no foreign key to traces (an execution may be stored before its trace,
or join none).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128


def upgrade() -> None:
    _mcp_executions()
    _mcp_methods()
    _mcp_tools()
    _mcp_violations()


def _mcp_executions() -> None:
    op.create_table(
        "mcp_executions",
        sa.Column("id", sa.String(length=ID), nullable=False),
        sa.Column("trace_id", sa.String(length=ID), nullable=True),
        sa.Column("call_id", sa.String(length=256), nullable=True),
        sa.Column("join", sa.String(length=16), nullable=False),
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=256), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("protocol_version", sa.String(length=32), nullable=True),
        sa.Column("session_id", sa.String(length=256), nullable=True),
        sa.Column("rpc_id", sa.Text(), nullable=True),
        sa.Column("delivery", sa.String(length=16), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mcp_executions_trace_id", "mcp_executions", ["trace_id"])
    op.create_index("ix_mcp_executions_call_id", "mcp_executions", ["call_id"])
    op.create_index("ix_mcp_executions_join_started", "mcp_executions", ["join", "started_at"])


def _mcp_methods() -> None:
    op.create_table(
        "mcp_methods",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=128), nullable=False),
        sa.Column("trace_id", sa.String(length=ID), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("protocol_version", sa.String(length=32), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mcp_methods_server", "mcp_methods", ["server"])
    op.create_index("ix_mcp_methods_trace_id", "mcp_methods", ["trace_id"])


def _mcp_tools() -> None:
    op.create_table(
        "mcp_tools",
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("tools", sa.JSON(), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("server"),
    )


def _mcp_violations() -> None:
    op.create_table(
        "mcp_violations",
        sa.Column("id", sa.String(length=ID), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("trace_id", sa.String(length=ID), nullable=True),
        sa.Column("execution_id", sa.String(length=ID), nullable=True),
        sa.Column("call_id", sa.String(length=256), nullable=True),
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=256), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("enforced", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_mcp_violations_trace_id", "mcp_violations", ["trace_id"])
    op.create_index("ix_mcp_violations_execution_id", "mcp_violations", ["execution_id"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
