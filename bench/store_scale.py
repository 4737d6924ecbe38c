"""A store at scale: fill it through the production writer, then time the read API, start-up
and retention on it, against the targets.

Fills a SQLite file or a PostgreSQL database through `StoreWriter.write_batch` (every fold,
index and full-text update as in production) with agent runs (`store_workload.py`), printing
the store path's steps/s at 10k, 100k and 1M steps; then starts `loopwatch serve` on it and
times the read API; then purges the oldest tenth while a probe keeps writing, and reports
how long the writer was held up. The store must be empty unless `--reuse` is given.

Usage: python bench/store_scale.py [--steps 100000] [--database-url URL] [--reuse]
       [--tries 20] [--no-reads] [--no-retention]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from idle_cpu import cpu_seconds
from store_reads import samples, start_server, stop_server, time_reads
from store_retention import retention
from store_workload import Workload

from gateway.store.engine import create_schema, make_engine
from gateway.store.models import STEPS
from gateway.store.partitions import ranges as partitions
from gateway.store.partitions.convert import partition_store
from gateway.store.write.writer import StoreWriter

CHECKPOINTS = (10_000, 100_000, 1_000_000, 10_000_000)
BATCH = 200  # the recorder's batch size
DAYS = 60.0  # the fill spans this many days, ending an hour ago
TARGET_STEPS_PER_S = 2000.0
TARGET_START_S = 5.0
# On a server without autovacuum, the fill vacuums the updated tables this often (steps).
VACUUM_STEPS = 50_000


def stored_steps(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(sa.select(sa.func.count()).select_from(STEPS)) or 0)


class _Window:
    """Write time since the last checkpoint: wall clock, and CPU time (on a loaded machine
    the wall clock waits for a core; CPU time does not): this process's, SQLite's included,
    plus that of the database server's backends for this database on PostgreSQL."""

    def __init__(self, engine: sa.Engine) -> None:
        self.wall = self.cpu = self.worst = 0.0
        self.steps = 0
        self._engine = engine
        self._server_began = _server_cpu(engine)

    def add(self, steps: int, wall: float, cpu: float) -> None:
        self.steps += steps
        self.wall, self.cpu, self.worst = self.wall + wall, self.cpu + cpu, max(self.worst, wall)

    def report(self, made: int) -> str:
        server = _server_cpu(self._engine)
        server_cpu = sum(server[pid] - self._server_began.get(pid, 0.0) for pid in server)
        line = (
            f"  at {made:>9,} steps: {self.steps / self.wall:6.0f} steps/s wall, "
            f"{self.steps / max(self.cpu + server_cpu, 1e-9):6.0f} per CPU-second"
        )
        if self._engine.dialect.name == "postgresql":
            line += f" (of which the server {100 * server_cpu / (self.cpu + server_cpu):.0f} %)"
        return line + f"; slowest batch {self.worst * 1000:.0f} ms, over the last {self.steps:,}"


def _server_cpu(engine: sa.Engine) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend serving this database (a local server)."""
    if engine.dialect.name != "postgresql":
        return {}
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    with engine.connect() as conn:
        pids = list(conn.exec_driver_sql(query).scalars())
    return {pid: cpu_seconds(pid) for pid in pids}


def fill(engine: sa.Engine, steps: int) -> None:
    """Write `steps` steps in recorder-sized batches; only write_batch is timed."""
    start = datetime.now(UTC) - timedelta(days=DAYS, hours=1)
    # A partitioned PostgreSQL store gets its days' partitions, as if written as they came.
    partitions.ensure(engine, start, datetime.now(UTC) + timedelta(days=1), 1)
    workload = Workload(steps, start=start, days=DAYS)
    writer = StoreWriter(engine)
    marks = [c for c in CHECKPOINTS if c < steps] + [steps]
    window = _Window(engine)
    print(
        f"store path, batches of {BATCH} (write_batch time only; "
        f"target ≥ {TARGET_STEPS_PER_S:.0f}, flat):"
    )
    vacuum_every = VACUUM_STEPS if _without_autovacuum(engine) else 0
    if vacuum_every:
        print(
            f"  (a server without autovacuum: traces and sessions vacuumed every "
            f"{vacuum_every:,} steps, untimed)"
        )
    for batch in workload.batches(BATCH):
        wall, cpu = time.perf_counter(), time.process_time()
        writer.write_batch(batch)
        window.add(len(batch), time.perf_counter() - wall, time.process_time() - cpu)
        if vacuum_every and workload.made % vacuum_every < len(batch):
            _vacuum_updated(engine)
        if workload.made >= marks[0]:
            marks.pop(0)
            print(window.report(workload.made))
            window = _Window(engine)
    print(f"  {workload.traces:,} traces, load {os.getloadavg()[0]:.1f}")


def _without_autovacuum(engine: sa.Engine) -> bool:
    """A PostgreSQL server run without autovacuum (test servers often are)."""
    if engine.dialect.name != "postgresql":
        return False
    with engine.connect() as conn:
        return conn.exec_driver_sql("SHOW autovacuum").scalar() == "off"


def _vacuum_updated(engine: sa.Engine) -> None:
    """What autovacuum would do on a production server: the tables every batch updates
    (a trace's and a session's row take a new version a batch) get their dead versions'
    space back for reuse. Untimed, as autovacuum's own worker is not the writer."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM traces, sessions")


def size_per_step(engine: sa.Engine, database_url: str) -> None:
    steps = stored_steps(engine)
    if engine.dialect.name == "sqlite":
        path = Path(engine.url.database or "")
        size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    else:
        with engine.connect() as conn:
            size = int(
                conn.scalar(
                    sa.text(
                        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                    )
                )
                or 0
            )
    print(
        f"size: {size / 1e6:,.1f} MB, {size / max(steps, 1) / 1000:.2f} KB a step ({steps:,} steps)"
    )


def reads(database_url: str, tries: int) -> None:
    found = samples(database_url)
    log = Path(tempfile.gettempdir()) / "loopwatch-store-scale.log"
    server, base, figures = start_server(database_url, log)
    try:
        ready = figures["readyz_s"]
        print(
            f"start-up: /healthz {figures['healthz_s']:.2f} s, /readyz {ready:.2f} s "
            f"(target ≤ {TARGET_START_S:.0f}  {'ok' if ready <= TARGET_START_S else 'OVER'}), "
            f"CPU settled {figures['settled_s']:.1f} s after launch"
        )
        time_reads(base, found, tries)
    finally:
        stop_server(server)


def main(args: argparse.Namespace) -> None:
    database_url = args.database_url or "sqlite:///" + os.path.join(
        tempfile.gettempdir(), f"loopwatch-scale-{args.steps}.db"
    )
    print(f"store {database_url}, load {os.getloadavg()[0]:.1f} (1 min, {os.cpu_count()} CPUs)")
    engine = make_engine(database_url)
    create_schema(engine)
    if args.partitioned:  # before the fill: its rows go straight into their partitions
        partition_store(engine)
    present = stored_steps(engine)
    if present and not args.reuse:
        raise SystemExit(f"the store holds {present:,} steps: give --reuse or an empty store")
    if not present:
        fill(engine, args.steps)
    if engine.dialect.name == "postgresql":
        # What autovacuum does after a bulk load (servers for tests often run without it):
        # without statistics the planner may scan a table an index would answer.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    size_per_step(engine, database_url)
    if not args.no_reads:
        reads(database_url, args.tries)
    if not args.no_retention:
        retention(engine, args.slowest)
    engine.dispose()
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument(
        "--database-url",
        help="sqlite:///... or postgresql://... (default: a temporary SQLite file)",
    )
    parser.add_argument("--reuse", action="store_true", help="time a store filled before (no fill)")
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--no-reads", action="store_true")
    parser.add_argument(
        "--partitioned", action="store_true", help="PostgreSQL: `loopwatch store partition` first"
    )
    parser.add_argument("--no-retention", action="store_true", help="leave the store as filled")
    parser.add_argument(
        "--slowest",
        type=int,
        default=0,
        help="print this many of the longest retention transactions, statement by statement",
    )
    main(parser.parse_args())
