"""`loopwatch store partition`: converts a PostgreSQL store's steps, items and violations to
tables partitioned by their trace's placement time (gateway.store.partitions.ranges), once.

Opt-in, not a schema revision: each partition keeps its own full-text index and vocabulary
(more disk a step), and the conversion copies every row under an exclusive lock (minutes
for 100k steps). It pays on large stores with retention, which then drops whole partitions.

Old traces get `placed_at` (their start, else their first step's), copied onto their rows.
The three tables are rebuilt partitioned by range on `placed_at`, with a DEFAULT partition
and a partition a day (a week past MAX_DAILY days of history) from the oldest trace to two
days ahead; the rows move over in one `INSERT … SELECT` a table, then the indexes are built
once on the filled tables (as they were, read from the catalog). The primary keys become
(id, placed_at) and the unique (trace_id, seq) takes placed_at as well: PostgreSQL wants the
partition key in each. The foreign keys of these tables are not kept: a key to a partitioned
table is checked when its partition is detached, and `ON DELETE CASCADE` from `traces` would
probe every partition; the writer stores a step and its items in one transaction, and
retention deletes children first. All in one transaction: it converts whole or not at all.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from gateway.store.engine import create_schema, write_connection
from gateway.store.migrate import SCHEMA_LOCK_ID
from gateway.store.partitions import ranges as partitions

PARTITIONED = partitions.PARTITIONED
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


class NotPostgres(ValueError):
    """SQLite has no partitions."""


def partition_store(engine: Engine) -> bool:
    """Convert the store (its schema brought to the newest revision first); False if it
    was partitioned already. Writers wait for the conversion's locks meanwhile."""
    if engine.dialect.name != "postgresql":
        raise NotPostgres("time partitions need PostgreSQL; this store is SQLite")
    create_schema(engine)
    with write_connection(engine) as conn, conn.begin():
        # One at a time, and never beside a schema upgrade.
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_ID)))
        if partitions.is_partitioned(conn):
            partitions.remember(engine, True)
            return False
        _place_old_traces(conn)
        _partition(conn)
        conn.exec_driver_sql("CREATE INDEX ix_traces_placed ON traces (placed_at, updated_at)")
    partitions.remember(engine, True)
    return True


def _place_old_traces(conn: Connection) -> None:
    conn.exec_driver_sql(
        "UPDATE traces t SET placed_at = coalesce(t.started_at, "
        "(SELECT min(s.started_at) FROM steps s WHERE s.trace_id = t.id)) "
        "WHERE t.placed_at IS NULL"
    )


def _partition(conn: Connection) -> None:
    indexes = {table: _index_definitions(conn, table) for table in PARTITIONED}
    for table in PARTITIONED:
        conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {table}__unpartitioned")
    for table in PARTITIONED:
        _create_partitioned(conn, table)
    for table in PARTITIONED:
        _move_rows(conn, table)
    conn.exec_driver_sql("ALTER SEQUENCE IF EXISTS items_id_seq OWNED BY items.id")
    for table in reversed(PARTITIONED):  # items refer to steps
        conn.exec_driver_sql(f"DROP TABLE {table}__unpartitioned")
    for table in PARTITIONED:
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD PRIMARY KEY (id, placed_at)")
    conn.exec_driver_sql(
        "ALTER TABLE steps ADD CONSTRAINT uq_steps_trace_seq UNIQUE (trace_id, seq, placed_at)"
    )
    for definitions in indexes.values():
        for definition in definitions:
            conn.exec_driver_sql(definition)
    for table in PARTITIONED:
        conn.exec_driver_sql(f"ANALYZE {table}")


def _index_definitions(conn: Connection, table: str) -> list[str]:
    """The table's indexes besides its keys, as CREATE INDEX statements."""
    rows = conn.exec_driver_sql(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = current_schema() AND tablename = %(table)s",
        {"table": table},
    ).all()
    return [definition for name, definition in rows if name not in _REPLACED]


def _create_partitioned(conn: Connection, table: str) -> None:
    """The same columns (defaults and generated ones too), partitioned by placement."""
    conn.exec_driver_sql(
        f"CREATE TABLE {table} (LIKE {table}__unpartitioned INCLUDING DEFAULTS "
        f"INCLUDING GENERATED) PARTITION BY RANGE (placed_at)"
    )
    conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN placed_at SET NOT NULL")
    conn.exec_driver_sql(f"CREATE TABLE {table}__default PARTITION OF {table} DEFAULT")
    for lower, upper in _ranges(conn):
        bounds = f"FROM ('{lower.isoformat(' ')}') TO ('{upper.isoformat(' ')}')"
        conn.exec_driver_sql(
            f"CREATE TABLE {table}__p{lower:%Y%m%d} PARTITION OF {table} FOR VALUES {bounds}"
        )


def _ranges(conn: Connection) -> list[tuple[datetime, datetime]]:
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


def _move_rows(conn: Connection, table: str) -> None:
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
    conn.exec_driver_sql(
        f"INSERT INTO {table} ({listed}, placed_at) "
        f"SELECT {selected}, {placement} FROM {table}__unpartitioned src {join}"
    )
