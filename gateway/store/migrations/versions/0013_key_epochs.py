"""Writes that stay flat: the indexes on random keys lead with a key epoch.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

`steps.key_epoch` and `items.key_epoch` (gateway.store.key_epochs) number the steps in runs
of 8,192; the five indexes on random keys (continuation key, response id, provider request
id, emitted call ids, arguments keys) become (key_epoch, key, ...), so a batch's inserts go
into the newest epoch's small, cached subtree instead of a leaf of their own each. Rows
stored before take epoch 0 (a plain ALTER TABLE ADD COLUMN with a default: no rewrite);
the writer starts epoch 1 on its first batch. The indexes are built again: on a store of
1M steps that takes a minute or so, once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HAS_CALL_ID = sa.text("call_id IS NOT NULL")
HAS_ARGS_KEY = sa.text("args_key IS NOT NULL")

# (name, table, columns after the epoch, partial index condition)
KEYED: tuple[tuple[str, str, list[str], sa.TextClause | None], ...] = (
    ("ix_steps_continuation_key", "steps", ["continuation_key"], None),
    ("ix_steps_response_id", "steps", ["response_id"], None),
    ("ix_steps_provider_request_id", "steps", ["provider_request_id"], None),
    ("ix_items_call_id_kind", "items", ["call_id", "direction", "kind"], HAS_CALL_ID),
    ("ix_items_args_key", "items", ["args_key"], HAS_ARGS_KEY),
)


def upgrade() -> None:
    for table in ("steps", "items"):
        op.add_column(
            table, sa.Column("key_epoch", sa.Integer(), nullable=False, server_default="0")
        )
    for name, table, columns, where in KEYED:
        op.drop_index(name, table_name=table, if_exists=True)
        op.create_index(
            name,
            table,
            ["key_epoch", *columns],
            sqlite_where=where,
            postgresql_where=where,
        )


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
