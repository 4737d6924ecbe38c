"""Retention on a filled store, for `store_scale.py`: the oldest tenth of the traces purged
while a probe writer stores small batches; how long each retention transaction held the
store (what a SQLite writer waits for) and the probe's slowest batch during it and before,
with each transaction's statements timed on request (`--slowest`) and, on PostgreSQL, the
lock waits sampled.
"""

from __future__ import annotations

import gc
import threading
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from store_workload import Workload

from gateway.store.models import TRACES
from gateway.store.partitions import ranges as partitions
from gateway.store.retention.sweep import purge_batch
from gateway.store.write.writer import StoreWriter

TARGET_RETENTION_HOLD_MS = 250.0


def retention(engine: sa.Engine, slowest: int = 0) -> None:
    """Purge the oldest tenth of the traces while a probe writes small batches: the longest
    retention transaction holds the write lock that long; the probe's slowest write during
    retention, against its slowest before, is how long the writer was held up."""
    t = TRACES.c
    with engine.connect() as conn:
        count = int(conn.scalar(sa.select(sa.func.count()).select_from(TRACES)) or 0)
        cutoff = conn.scalar(
            sa.select(t.updated_at).order_by(t.updated_at).offset(count // 10).limit(1)
        )
    if cutoff is None:
        return
    probe = _Probe(engine)
    probe.start()
    time.sleep(3.0)  # the probe's own pace, without retention
    alone = list(probe.latencies)
    held = _TransactionClock(engine, threading.get_ident())
    waits = _LockWaits(engine) if slowest and engine.dialect.name == "postgresql" else None
    parts = _partitions(engine)
    purged, began = 0, time.perf_counter()
    while done := purge_batch(engine, cutoff, 500):
        purged += done
    total = time.perf_counter() - began
    held.close()
    if parts:
        print(f"partitions before retention {parts}, after {_partitions(engine)}")
    probe.stop()
    during = probe.latencies[len(alone) :]
    longest = max(held.durations, default=0.0) * 1000
    verdict = "ok" if longest <= TARGET_RETENTION_HOLD_MS else "OVER"
    print(
        f"retention of the oldest tenth: {purged:,} traces in {total:.1f} s, "
        f"{len(held.durations)} transactions, the longest {longest:.0f} ms   "
        f"(target ≤ {TARGET_RETENTION_HOLD_MS:.0f}  {verdict}); a writer's slowest batch "
        f"{max(during, default=0) * 1000:.0f} ms during it, {max(alone, default=0) * 1000:.0f} "
        f"ms before"
    )
    held.slowest(slowest)
    if waits is not None:
        waits.report()


class _TransactionClock:
    """Times every transaction one thread runs on `engine`, from BEGIN to COMMIT, and each
    statement in it (to tell which one makes a transaction long)."""

    _EVENTS = ("begin", "commit", "rollback", "before_cursor_execute", "after_cursor_execute")

    def __init__(self, engine: sa.Engine, thread: int) -> None:
        self.durations: list[float] = []
        self.statements: list[list[tuple[float, str]]] = []  # per committed transaction
        self.cpu: list[float] = []  # this thread's CPU time in each (the rest is waiting)
        self.collected: list[float] = []  # garbage collections this thread ran in each
        self._cpu_began = 0.0
        self._gc_began = self._gc_total = 0.0
        gc.callbacks.append(self._gc)
        self._engine, self._thread = engine, thread
        self._began: dict[int, float] = {}
        self._open: dict[int, list[tuple[float, str]]] = {}
        self._statement_began = 0.0
        self._committing: list[tuple[float, str]] | None = None
        for name in self._EVENTS:
            sa.event.listen(engine, name, getattr(self, f"_{name}"))
        self._do_commit = engine.dialect.do_commit
        engine.dialect.do_commit = self._commit_then_end  # type: ignore[method-assign]

    def _commit_then_end(self, dbapi_connection: Any) -> None:
        self._timed_commit(dbapi_connection)
        self._ended()

    def _begin(self, conn: sa.Connection) -> None:
        if threading.get_ident() == self._thread:
            self._began[id(conn)] = time.perf_counter()
            self._open[id(conn)] = []
            self._cpu_began = time.thread_time()
            self._gc_total = 0.0

    def _commit(self, conn: sa.Connection) -> None:
        began = self._began.pop(id(conn), None)
        statements = self._open.pop(id(conn), [])
        if began is not None and threading.get_ident() == self._thread:
            self._committing = statements  # the COMMIT itself runs after this event
            self.durations.append(-began)
            self.statements.append(statements)

    def _ended(self) -> None:
        if threading.get_ident() == self._thread and self._committing is not None:
            self.durations[-1] += time.perf_counter()
            self.cpu.append(time.thread_time() - self._cpu_began)
            self.collected.append(self._gc_total)
            self._committing = None

    def _rollback(self, conn: sa.Connection) -> None:
        self._began.pop(id(conn), None)  # a read's implicit transaction
        self._open.pop(id(conn), None)

    def _before_cursor_execute(self, conn: sa.Connection, *args: object) -> None:
        self._statement_began = time.perf_counter()

    def _after_cursor_execute(
        self, conn: sa.Connection, cursor: object, statement: str, *args: object
    ) -> None:
        statements = self._open.get(id(conn))
        if statements is not None and threading.get_ident() == self._thread:
            statements.append((time.perf_counter() - self._statement_began, statement))

    def _timed_commit(self, dbapi_connection: Any) -> None:
        """The dialect's COMMIT, timed as a statement: the `commit` event comes before it."""
        began = time.perf_counter()
        self._do_commit(dbapi_connection)
        if threading.get_ident() == self._thread and self._committing is not None:
            self._committing.append((time.perf_counter() - began, "COMMIT"))

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            self._gc_total += time.perf_counter() - self._gc_began

    def slowest(self, count: int) -> None:
        """Print each kind of statement's total and longest time over the transactions, and
        the `count` longest transactions with each statement's time in them."""
        if not count:
            return
        kinds: dict[str, list[float]] = {}
        for statements in self.statements:
            for seconds, statement in statements:
                kinds.setdefault(" ".join(statement.split()[:4]), []).append(seconds)
        print("  statements by kind: count, total ms, longest ms")
        for kind, times in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"    {len(times):6} {sum(times) * 1000:9.0f} {max(times) * 1000:8.1f}  {kind}")
        ordered = sorted(self.durations)
        print(
            "  transactions: median "
            f"{ordered[len(ordered) // 2] * 1000:.0f} ms, 99th "
            f"{ordered[int(len(ordered) * 0.99)] * 1000:.0f} ms"
        )
        ranked = sorted(range(len(self.durations)), key=lambda i: -self.durations[i])
        for i in ranked[:count]:
            print(
                f"  transaction {i}: {self.durations[i] * 1000:.0f} ms, "
                f"{self.cpu[i] * 1000:.0f} ms of it this thread's CPU time, "
                f"{self.collected[i] * 1000:.0f} ms its garbage collections"
            )
            for seconds, statement in self.statements[i]:
                text = " ".join(statement.split())
                print(f"    {seconds * 1000:7.1f} ms  {text[:150]}")
            rest = self.durations[i] - sum(seconds for seconds, _ in self.statements[i])
            print(f"    {rest * 1000:7.1f} ms  (between statements)")

    def close(self) -> None:
        self._engine.dialect.do_commit = self._do_commit  # type: ignore[method-assign]
        gc.callbacks.remove(self._gc)
        for name in self._EVENTS:
            sa.event.remove(self._engine, name, getattr(self, f"_{name}"))


class _LockWaits:
    """Samples the database's sessions every 10 ms while retention runs: each statement
    seen waiting for a lock (the probe's behind retention's, or the other way round)."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self.samples = 0
        self.seen: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        query = (
            "SELECT left(query, 60) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        with self._engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            while not self._stop.wait(0.01):
                self.samples += 1
                for text in conn.exec_driver_sql(query).scalars():
                    self.seen[text] = self.seen.get(text, 0) + 1

    def report(self) -> None:
        self._stop.set()
        self._thread.join()
        print(f"  lock waits in {self.samples} samples of 10 ms:")
        for text, times in sorted(self.seen.items(), key=lambda kv: -kv[1]):
            print(f"    {times:5}  {' '.join(text.split())}")


class _Probe:
    """A writer thread storing one small run's steps after another, each batch timed."""

    def __init__(self, engine: sa.Engine) -> None:
        self._writer = StoreWriter(engine)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.latencies: list[float] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        workload = Workload(10**9, start=datetime.now(UTC), days=1, seed=99)
        for batch in workload.batches(20):
            if self._stop.is_set():
                return
            began = time.perf_counter()
            self._writer.write_batch(batch)
            self.latencies.append(time.perf_counter() - began)
            time.sleep(0.02)


def _partitions(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return len(partitions.listed(conn)) if partitions.is_partitioned(conn) else 0
