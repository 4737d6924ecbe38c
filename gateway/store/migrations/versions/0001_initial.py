"""The schema as `create_all` made it before migrations.

Revision ID: 0001
Revises:
Create Date: 2026-12-01

Every table and index is created only if missing: a database made before migrations (by
`create_all`, without `alembic_version`) is adopted in place by running this revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128  # length of trace, step and violation ids


def _id(name: str, *, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(length=ID), nullable=nullable)


def _index(name: str, table: str, columns: list[str]) -> None:
    op.create_index(name, table, columns, unique=False, if_not_exists=True)


def upgrade() -> None:
    op.create_table(
        "budget_ledger",
        _id("trace_id"),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("tokens_spent", sa.BigInteger(), nullable=False),
        sa.Column("tokens_in_flight", sa.BigInteger(), nullable=False),
        sa.Column("last_reserved", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("trace_id"),
        if_not_exists=True,
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
        if_not_exists=True,
    )
    _traces()
    _steps()
    _violations()
    _items()


def _traces() -> None:
    op.create_table(
        "traces",
        _id("id"),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=False),
        sa.Column("violation_count", sa.Integer(), nullable=False),
        sa.Column("last_stop_reason", sa.String(length=32), nullable=True),
        sa.Column("budget_max_steps", sa.Integer(), nullable=True),
        sa.Column("budget_max_tokens", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    _index("ix_traces_status_updated", "traces", ["status", "updated_at", "id"])
    _index("ix_traces_updated", "traces", ["updated_at", "id"])


def _steps() -> None:
    op.create_table(
        "steps",
        _id("id"),
        _id("trace_id"),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("protocol", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=True),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("stop_reason", sa.String(length=32), nullable=False),
        sa.Column("raw_stop_reason", sa.String(length=128), nullable=True),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=True),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=True),
        sa.Column("total_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=True),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=True),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=True),
        sa.Column("provider_request_id", sa.String(length=256), nullable=True),
        sa.Column("response_id", sa.String(length=256), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        _id("continuation_key", nullable=True),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trace_id", "seq", name="uq_steps_trace_seq"),
        if_not_exists=True,
    )
    _index("ix_steps_continuation_key", "steps", ["continuation_key"])
    _index("ix_steps_model_trace", "steps", ["model", "trace_id"])
    _index("ix_steps_provider_request_id", "steps", ["provider_request_id"])
    _index("ix_steps_response_id", "steps", ["response_id"])
    _index("ix_steps_trace_id", "steps", ["trace_id"])


def _violations() -> None:
    op.create_table(
        "violations",
        _id("id"),
        sa.Column("kind", sa.String(length=64), nullable=False),
        _id("trace_id"),
        _id("step_id", nullable=True),
        sa.Column("call_id", sa.String(length=256), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("enforced", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    _index("ix_violations_created", "violations", ["created_at", "id"])
    _index("ix_violations_kind_created", "violations", ["kind", "created_at", "id"])
    _index("ix_violations_trace_id", "violations", ["trace_id"])


def _items() -> None:
    op.create_table(
        "items",
        sa.Column("id", sa.Integer(), nullable=False),
        _id("step_id"),
        sa.Column("direction", sa.String(length=8), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("call_id", sa.String(length=256), nullable=True),
        sa.Column("tool_name", sa.String(length=256), nullable=True),
        sa.Column("arguments", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=True),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["step_id"], ["steps.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        if_not_exists=True,
    )
    _index("ix_items_call_id", "items", ["call_id"])
    _index("ix_items_step_id", "items", ["step_id"])


def downgrade() -> None:
    for table in ("items", "violations", "steps", "traces", "meta", "budget_ledger"):
        op.drop_table(table)  # their indexes go with them
