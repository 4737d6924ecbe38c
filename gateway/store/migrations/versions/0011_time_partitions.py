"""Time partitions on PostgreSQL: steps, items and violations partitioned by their trace's
placement time, so retention drops a partition instead of deleting rows.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-01

Every trace gets `placed_at` (its start, for those stored already), copied onto its steps,
items and violations. PostgreSQL: the three tables are rebuilt as tables partitioned by
range on `placed_at`, with a DEFAULT partition and a partition a day from the oldest stored
trace to two days ahead; the rows move over in one `INSERT … SELECT` a table, then the
indexes are built once on the filled tables (as they were, read from the catalog, so index
changes of other revisions carry over). The primary keys become (id, placed_at) and the
unique (trace_id, seq) takes placed_at as well: PostgreSQL wants the partition key in each.
The foreign keys of these tables are not kept: a key to a partitioned table must be checked
when its partition is detached, and `ON DELETE CASCADE` from `traces` would probe every
partition; the writer stores a step and its items in one transaction, and retention deletes
children first. SQLite: the columns are added, left null (it keeps deleting rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PARTITIONED = ("steps", "items", "violations")
AHEAD_DAYS = 2
MAX_DAILY = 62
# Where each table's rows find their trace's placement (`src` is the old table).
PLACEMENT = {
    "steps": (
        "LEFT JOIN traces t ON t.id = src.trace_id",
        "coalesce(t.placed_at, src.started_at)",
    ),
    "items": (
        "LEFT JOIN steps__unpartitioned s ON s.id = src.step_id "
        "LEFT JOIN traces t ON t.id = s.trace_id",
        "coalesce(t.placed_at, s.started_at, timestamp '1970-01-01')",
    ),
    "violations": (
        "LEFT JOIN traces t ON t.id = src.trace_id",
        "coalesce(t.placed_at, src.created_at)",
    ),
}
# Constraints and indexes the rebuilt tables get by other means (their keys, widened).
_REPLACED = {"steps_pkey", "items_pkey", "violations_pkey", "uq_steps_trace_seq"}


def upgrade() -> None:
    op.add_column("traces", sa.Column("placed_at", sa.DateTime(), nullable=True))
    for table in PARTITIONED:
        op.add_column(table, sa.Column("placed_at", sa.DateTime(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("UPDATE traces SET placed_at = started_at")
        _partition()
    op.create_index("ix_traces_placed", "traces", ["placed_at", "updated_at"])


def _partition() -> None:
    conn = op.get_bind()
    indexes = {table: _index_definitions(conn, table) for table in PARTITIONED}
    for table in PARTITIONED:
        op.execute(f"ALTER TABLE {table} RENAME TO {table}__unpartitioned")
    for table in PARTITIONED:
        _create_partitioned(conn, table)
    for table in PARTITIONED:
        _move_rows(conn, table)
    op.execute("ALTER SEQUENCE IF EXISTS items_id_seq OWNED BY items.id")
    for table in reversed(PARTITIONED):  # items refer to steps
        op.execute(f"DROP TABLE {table}__unpartitioned")
    op.execute("ALTER TABLE steps ADD PRIMARY KEY (id, placed_at)")
    op.execute("ALTER TABLE items ADD PRIMARY KEY (id, placed_at)")
    op.execute("ALTER TABLE violations ADD PRIMARY KEY (id, placed_at)")
    op.execute(
        "ALTER TABLE steps ADD CONSTRAINT uq_steps_trace_seq UNIQUE (trace_id, seq, placed_at)"
    )
    for definitions in indexes.values():
        for definition in definitions:
            op.execute(definition)
    op.execute("ANALYZE steps")
    op.execute("ANALYZE items")
    op.execute("ANALYZE violations")


def _index_definitions(conn: sa.Connection, table: str) -> list[str]:
    """The table's indexes besides its keys, as CREATE INDEX statements."""
    rows = conn.exec_driver_sql(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = current_schema() AND tablename = %(table)s",
        {"table": table},
    ).all()
    return [definition for name, definition in rows if name not in _REPLACED]


def _create_partitioned(conn: sa.Connection, table: str) -> None:
    """The same columns (defaults and generated ones too), partitioned by placement."""
    op.execute(
        f"CREATE TABLE {table} (LIKE {table}__unpartitioned INCLUDING DEFAULTS "
        f"INCLUDING GENERATED) PARTITION BY RANGE (placed_at)"
    )
    op.execute(f"ALTER TABLE {table} ALTER COLUMN placed_at SET NOT NULL")
    op.execute(f"CREATE TABLE {table}__default PARTITION OF {table} DEFAULT")
    for lower, upper in _ranges(conn):
        bounds = f"FROM ('{lower.isoformat(' ')}') TO ('{upper.isoformat(' ')}')"
        op.execute(
            f"CREATE TABLE {table}__p{lower:%Y%m%d} PARTITION OF {table} FOR VALUES {bounds}"
        )


def _ranges(conn: sa.Connection) -> list[tuple[datetime, datetime]]:
    """From the oldest stored trace's day to AHEAD_DAYS after today (UTC): a partition a
    day, or a week when the history is longer than MAX_DAILY days (fewer partitions)."""
    oldest, today = conn.exec_driver_sql(
        "SELECT min(placed_at), (now() AT TIME ZONE 'UTC') FROM traces"
    ).one()
    first = (oldest or today).replace(hour=0, minute=0, second=0, microsecond=0)
    last = today.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=AHEAD_DAYS)
    width = timedelta(days=1 if (last - first).days <= MAX_DAILY else 7)
    ranges = []
    while first <= last:
        ranges.append((first, first + width))
        first += width
    return ranges


def _move_rows(conn: sa.Connection, table: str) -> None:
    columns = list(
        conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %(table)s "
            "AND is_generated = 'NEVER' AND column_name <> 'placed_at' ORDER BY ordinal_position",
            {"table": f"{table}__unpartitioned"},
        ).scalars()
    )
    join, placement = PLACEMENT[table]
    listed = ", ".join(f'"{c}"' for c in columns)
    selected = ", ".join(f'src."{c}"' for c in columns)
    op.execute(
        f"INSERT INTO {table} ({listed}, placed_at) "
        f"SELECT {selected}, {placement} FROM {table}__unpartitioned src {join}"
    )


def downgrade() -> None:
    raise NotImplementedError("loopwatch schema revisions only go forward")
