"""PostgreSQL's opt-in time partitions of the per-step tables (`loopwatch store partition`,
gateway.store.partitions.convert): whether the store has them, which exist, making them
ahead of the writes, dropping one.

`steps`, `items` and `violations` are partitioned by range on `placed_at`, the trace's
placement time copied onto each of its rows, so a whole trace lives in one partition and
retention can drop a partition whose traces are all past the cutoff. The three tables share
their partitions' bounds and names (`steps__p20261201`, `items__p20261201`, ...). A DEFAULT
partition takes any row no range partition covers (a replayed old record, a clock jump), so
the writer never fails for a missing partition; the keeper makes them ahead, outside the
writer's path, because creating or dropping one locks the whole table for a moment.
An unpartitioned store (SQLite, or PostgreSQL never converted) has none: everything here
is a no-op there, and reads and retention go as before.
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from gateway.store.engine import write_connection

log = logging.getLogger(__name__)

PARTITIONED = ("steps", "items", "violations")
# Periods made ahead of now: a keeper that stops for less than this never lets rows fall
# into the DEFAULT partition.
AHEAD_PERIODS = 2
# Making a partition waits for the transactions on the tables, and the writes queued behind
# it wait as long: at most a slow batch (one not made now is tried an hour later).
LOCK_TIMEOUT = "1s"
# A drop waits less, and tries again (gateway.store.retention.partitions): a writer queued
# behind its lock is never held up for longer than this.
DROP_LOCK_TIMEOUT = "200ms"
# Any constant shared by every replica: one keeper at a time changes the partitions.
_KEEPER_LOCK_ID = 0x4C6F6F71
_EPOCH = datetime(1970, 1, 1)
_MONDAY = 4  # 1970-01-01 was a Thursday: weeks start on the epoch day 4, a Monday
_BOUNDS = re.compile(r"FROM \('([^']+)'\) TO \('([^']+)'\)")


@dataclass(frozen=True, order=True)
class Partition:
    """One range [lower, upper) of naive UTC placement times, in all three tables."""

    lower: datetime
    upper: datetime

    @property
    def suffix(self) -> str:
        return "__p" + self.lower.strftime("%Y%m%d")

    def table(self, parent: str) -> str:
        return parent + self.suffix


def period_days(retention_days: int | None) -> int:
    """A day while retention keeps at most about two months (a partition holds a day more
    than retention keeps, and the tables have about `retention_days` partitions), a week
    beyond (still a seventh of the window held longer, and a year is 53 partitions, so a
    read by trace id that cannot prune still plans few)."""
    return 1 if retention_days is None or retention_days <= 62 else 7


def is_partitioned(conn: Connection) -> bool:
    """Read from the catalog now."""
    if conn.dialect.name != "postgresql":
        return False
    query = "SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('steps')"
    return conn.exec_driver_sql(query).first() is not None


# Whether each engine's store is partitioned, read once (at start-up): converting a store
# is an operator's command run beside a stopped gateway, which reads it again on restart.
_KNOWN: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def partitioned(engine: Engine) -> bool:
    known = _KNOWN.get(engine)
    if known is None:
        known = False
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                known = is_partitioned(conn)
        _KNOWN[engine] = known
    return known


def remember(engine: Engine, known: bool) -> None:
    """The conversion's own engine knows at once."""
    _KNOWN[engine] = known


def listed(conn: Connection) -> list[Partition]:
    """The range partitions, oldest first (those of `steps`; the others mirror them)."""
    rows = conn.exec_driver_sql(
        "SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('steps')"
    ).scalars()
    found = []
    for bound in rows:
        match = _BOUNDS.search(bound or "")
        if match:
            found.append(Partition(*(datetime.fromisoformat(v) for v in match.groups())))
    return sorted(found)


def naive_utc(when: datetime) -> datetime:
    return when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def _floor(when: datetime, days: int) -> datetime:
    day = (when - _EPOCH).days
    if days > 1:
        day -= (day - _MONDAY) % days
    return _EPOCH + timedelta(days=day)


def missing(
    existing: list[Partition], start: datetime, end: datetime, days: int
) -> list[Partition]:
    """The partitions that would cover [start, end] with what exists: periods of `days`,
    cut short where an existing partition (perhaps of another width) begins or ends."""
    wanted: list[Partition] = []
    at = _floor(start, days)
    while at <= end:
        lower, upper = at, _floor(at, days) + timedelta(days=days)
        for part in existing:
            if part.lower <= lower < part.upper:
                lower = part.upper  # covered up to there
            elif lower < part.lower < upper:
                upper = part.lower
        if lower < upper:
            wanted.append(Partition(lower, upper))
        at = max(upper, lower)
    return wanted


def ensure(engine: Engine, start: datetime, end: datetime, days: int) -> list[Partition]:
    """Make the partitions covering placement times [start, end]; return those made. One
    whose range already has rows in the DEFAULT partition is left out (logged): its rows
    stay there, and retention deletes them row by row."""
    start, end = naive_utc(start), naive_utc(end)
    if not partitioned(engine):
        return []
    with engine.connect() as conn:
        todo = missing(listed(conn), start, end, days)
    made = []
    for part in todo:
        try:
            with write_connection(engine) as conn, conn.begin():
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_KEEPER_LOCK_ID)))
                if part in missing(listed(conn), part.lower, part.lower, days):
                    _create(conn, part)
                    made.append(part)
        except sa_exc.DBAPIError as exc:  # rows in DEFAULT for the range, or a lock timeout
            log.warning("partition from %s not made: %s", part.lower, exc.orig)
    return made


def ensure_ahead(engine: Engine, now: datetime, days: int) -> list[Partition]:
    """The keeper's round: partitions from the current period to AHEAD_PERIODS on."""
    return ensure(engine, now, naive_utc(now) + timedelta(days=days * AHEAD_PERIODS), days)


def _create(conn: Connection, part: Partition) -> None:
    bounds = f"FROM ('{part.lower.isoformat(' ')}') TO ('{part.upper.isoformat(' ')}')"
    for parent in PARTITIONED:
        conn.exec_driver_sql(
            f"CREATE TABLE {part.table(parent)} PARTITION OF {parent} FOR VALUES {bounds}"
        )


def drop(conn: Connection, part: Partition) -> None:
    """Drop a partition of all three tables (the caller holds their locks)."""
    for parent in PARTITIONED:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {part.table(parent)}")


def lock_tables(conn: Connection) -> None:
    """Every partitioned table, exclusively, waiting at most DROP_LOCK_TIMEOUT (then raises)."""
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
    conn.exec_driver_sql(f"LOCK TABLE {', '.join(PARTITIONED)} IN ACCESS EXCLUSIVE MODE")
