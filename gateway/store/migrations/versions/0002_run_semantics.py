"""How a run ended, what it cost, where its time went, its session; refused items; search.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Existing traces keep their rows: `ok` becomes `completed` and `error` becomes `failed`
(both final, as they were shown), and their costs stay unknown (zero, no priced step).
Search: SQLite gets an FTS5 index over item text, tool names and call ids kept by
triggers; PostgreSQL a GIN index over the same words (`simple` configuration).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEARCH_SQLITE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5("
    "text, tool_name, call_id, content='items', content_rowid='id', tokenize='unicode61')",
    "CREATE TRIGGER IF NOT EXISTS items_fts_insert AFTER INSERT ON items BEGIN "
    "INSERT INTO items_fts(rowid, text, tool_name, call_id) "
    "VALUES (new.id, new.text, new.tool_name, new.call_id); END",
    "CREATE TRIGGER IF NOT EXISTS items_fts_delete AFTER DELETE ON items BEGIN "
    "INSERT INTO items_fts(items_fts, rowid, text, tool_name, call_id) "
    "VALUES ('delete', old.id, old.text, old.tool_name, old.call_id); END",
    "INSERT INTO items_fts(items_fts) VALUES ('rebuild')",
)
# The same expression as gateway.store.read.search uses, so the planner takes the index.
SEARCH_POSTGRES = (
    "CREATE INDEX IF NOT EXISTS ix_items_search ON items USING gin (to_tsvector('simple', "
    "coalesce(text, '') || ' ' || coalesce(tool_name, '') || ' ' || coalesce(call_id, '')))"
)


def upgrade() -> None:
    # Plain ALTER TABLE ADD COLUMN on both dialects: SQLite's copy-and-rename batch mode
    # would drop the old tables, and with foreign keys on that cascades into their rows.
    op.add_column(
        "traces", sa.Column("status_final", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("traces", sa.Column("last_step_started_at", sa.DateTime(), nullable=True))
    op.add_column(
        "traces", sa.Column("open_calls", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("traces", sa.Column("last_refusal_at", sa.DateTime(), nullable=True))
    op.add_column("traces", sa.Column("last_refusal_kind", sa.String(length=16), nullable=True))
    op.add_column(
        "traces", sa.Column("cost_nano", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.add_column(
        "traces", sa.Column("unpriced_steps", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("traces", sa.Column("model_ms", sa.Float(), nullable=False, server_default="0"))
    op.add_column("traces", sa.Column("tool_ms", sa.Float(), nullable=False, server_default="0"))
    op.add_column("traces", sa.Column("last_response_end", sa.DateTime(), nullable=True))
    op.add_column("traces", sa.Column("session_id", sa.String(length=256), nullable=True))
    op.add_column("traces", sa.Column("first_user_text", sa.Text(), nullable=True))
    op.create_index("ix_traces_session_updated", "traces", ["session_id", "updated_at", "id"])
    op.add_column("steps", sa.Column("cost_nano", sa.BigInteger(), nullable=True))
    op.add_column("steps", sa.Column("cost_source", sa.String(length=16), nullable=True))
    op.add_column("steps", sa.Column("tool_ms", sa.Float(), nullable=True))
    op.add_column("violations", sa.Column("items", sa.JSON(), nullable=True))
    for name in ("cost_spent", "cost_in_flight", "cost_last_held"):
        op.add_column(
            "budget_ledger", sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
        )
    op.add_column("budget_ledger", sa.Column("started_at", sa.Float(), nullable=True))
    op.execute(
        "UPDATE traces SET status = CASE status WHEN 'ok' THEN 'completed' "
        "WHEN 'error' THEN 'failed' ELSE status END, status_final = true"
    )
    op.execute(
        "UPDATE traces SET model_ms = coalesce((SELECT sum(steps.latency_ms) FROM steps "
        "WHERE steps.trace_id = traces.id), 0)"
    )
    if op.get_bind().dialect.name == "sqlite":
        for statement in SEARCH_SQLITE:
            op.execute(statement)
    else:
        op.execute(SEARCH_POSTGRES)


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
