"""Lists that seek: each trace's models in a table of their own, a sessions summary, the
duration sort's key as a column, and an index for every sort order of the list.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Existing data is carried over: the models from the steps, the sessions summed from their
traces, the span computed as the list used to compute it on every read. The steps' model
index goes: the model filter reads trace_models now.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = 128

# Whole milliseconds from the first request to the last response end, or to the last
# activity when no response ended (gateway.store.write.run_fold computes it for new batches).
SPAN_SQLITE = (
    "UPDATE traces SET span_ms = round((julianday(coalesce(last_response_end, updated_at)) "
    "- julianday(started_at)) * 86400000)"
)
SPAN_POSTGRES = (
    "UPDATE traces SET span_ms = round(extract(epoch FROM coalesce(last_response_end, "
    "updated_at) - started_at) * 1000)"
)
SESSIONS_FROM_TRACES = (
    "INSERT INTO sessions (session_id, trace_count, step_count, total_tokens, "
    "violation_count, cost_nano, started_at, last_activity) "
    "SELECT session_id, count(*), sum(step_count), sum(total_tokens), sum(violation_count), "
    "sum(cost_nano), min(started_at), max(updated_at) FROM traces "
    "WHERE session_id IS NOT NULL GROUP BY session_id"
)


def upgrade() -> None:
    _trace_models()
    _sessions()
    _span()
    op.create_index("ix_traces_steps", "traces", ["step_count", "id"])
    op.create_index("ix_traces_cost", "traces", ["cost_nano", "id"])
    op.create_index("ix_traces_session_started", "traces", ["session_id", "started_at"])


def _trace_models() -> None:
    op.create_table(
        "trace_models",
        sa.Column("trace_id", sa.String(length=ID), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(["trace_id"], ["traces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trace_id", "model"),
    )
    op.execute(
        "INSERT INTO trace_models (trace_id, model) "
        "SELECT DISTINCT trace_id, model FROM steps WHERE model IS NOT NULL"
    )
    op.create_index("ix_trace_models_model", "trace_models", ["model", "trace_id"])
    op.drop_index("ix_steps_model_trace", table_name="steps")


def _sessions() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(length=256), nullable=False),
        sa.Column("trace_count", sa.Integer(), nullable=False),
        sa.Column("step_count", sa.Integer(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("violation_count", sa.Integer(), nullable=False),
        sa.Column("cost_nano", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("last_activity", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.execute(SESSIONS_FROM_TRACES)
    op.create_index("ix_sessions_activity", "sessions", ["last_activity", "session_id"])


def _span() -> None:
    # Plain ALTER TABLE ADD COLUMN, as in 0002: no copy-and-rename on SQLite.
    op.add_column("traces", sa.Column("span_ms", sa.Float(), nullable=False, server_default="0"))
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.execute(SPAN_SQLITE if sqlite else SPAN_POSTGRES)
    op.create_index("ix_traces_span", "traces", ["span_ms", "id"])


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
