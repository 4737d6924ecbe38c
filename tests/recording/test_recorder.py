"""Recorder over a real store: batching, flush, drops, retries while the database is locked."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.items import Item, ItemKind
from gateway.recording.recorder import Record, Recorder
from gateway.step import StepRecord
from gateway.store.engine import create_schema
from gateway.store.models import STEPS
from gateway.store.write.writer import StoreWriter
from tests.conftest import OpenEngine

MakeStep = Callable[..., StepRecord]


def _steps(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(STEPS)).scalar_one())


@contextmanager
def _locked(database: Any) -> Iterator[None]:
    """Another client holds the write lock: the real way a shared database stalls writers."""
    conn = database.raw_connect()
    try:
        if database.dialect == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
        else:
            conn.execute("BEGIN")
            conn.execute("LOCK TABLE traces IN ACCESS EXCLUSIVE MODE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_batches_and_flush(engine: Engine, make_step: MakeStep) -> None:
    sizes: list[int] = []
    recorder = Recorder(
        StoreWriter(engine),
        batch_size=10,
        flush_seconds=30,  # only a full batch or flush() triggers a write
        on_batch=lambda seconds, size: sizes.append(size),
    )
    for _ in range(35):
        recorder.submit(make_step("t"))
    recorder.start(Background())
    await recorder.flush(timeout=10)
    assert sizes == [10, 10, 10, 5]
    assert _steps(engine) == 35
    assert recorder.queue_depth == 0
    assert recorder.last_batch_seconds > 0
    await recorder.close()


async def test_partial_batch_written_after_flush_seconds(
    engine: Engine, make_step: MakeStep
) -> None:
    recorder = Recorder(StoreWriter(engine), batch_size=100, flush_seconds=0.05)
    recorder.start(Background())
    recorder.submit(make_step("t"))
    await _until(lambda: _steps(engine) == 1, timeout=5)
    await recorder.close()


async def test_full_queue_drops_and_counts(engine: Engine, make_step: MakeStep) -> None:
    recorder = Recorder(StoreWriter(engine), queue_size=5, batch_size=2)
    for _ in range(8):
        recorder.submit(make_step("t"))  # not started: nothing drains the queue
    assert recorder.dropped_total == 3
    assert recorder.queue_depth == 5
    recorder.start(Background())
    await recorder.flush(timeout=10)
    assert _steps(engine) == 5
    await recorder.close()
    recorder.submit(make_step("t"))
    assert recorder.dropped_total == 4


async def test_retries_until_the_database_comes_back(
    database: Any, engine: Engine, open_engine: OpenEngine, make_step: MakeStep
) -> None:
    # A short wait for locks, so every attempt fails fast while the lock is held (the schema
    # is made beforehand, without it).
    impatient = open_engine(database.engine_url(lock_timeout="100"), busy_timeout_ms=100)
    recorder = Recorder(StoreWriter(impatient), flush_seconds=0.01, retry_initial=0.05)
    recorder.start(Background())
    with _locked(database):
        for _ in range(20):
            recorder.submit(make_step("t"))
        await _until(lambda: recorder.write_errors_total >= 2)
        for _ in range(5):
            recorder.submit(make_step("t"))  # records keep queuing during the outage
    await recorder.flush(timeout=15)
    assert _steps(engine) == 25
    assert recorder.dropped_total == 0
    await recorder.close()


async def test_submit_never_blocks_while_a_write_is_stuck(
    database: Any, engine: Engine, make_step: MakeStep
) -> None:
    recorder = Recorder(StoreWriter(engine), flush_seconds=0.01, queue_size=100_000)
    recorder.start(Background())
    records = [make_step("t", items=1) for _ in range(2000)]
    with _locked(database):
        recorder.submit(records[0])
        await asyncio.sleep(0.2)  # the first batch is now waiting on the lock in the thread
        started = time.perf_counter()
        for record in records[1:]:
            recorder.submit(record)
        submit_seconds = time.perf_counter() - started
        lags = []
        for _ in range(20):
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - before - 0.005)
        assert _steps(engine) == 0
    assert submit_seconds < 0.2
    assert max(lags) < 0.05
    await recorder.flush(timeout=20)
    assert _steps(engine) == 2000
    await recorder.close()


async def test_transform_and_writes_run_off_the_loop(
    sqlite_database: Any, open_engine: OpenEngine, make_step: MakeStep
) -> None:
    engine = open_engine(sqlite_database.url)
    create_schema(engine)
    threads: set[str] = set()

    def redact(record: Record) -> Record:
        threads.add(threading.current_thread().name)
        assert isinstance(record, StepRecord)
        items = [item.with_changes(text="[REDACTED]") for item in record.input_items]
        return replace(record, input_items=items)

    recorder = Recorder(StoreWriter(engine), transform=redact, batch_size=3)
    recorder.start(Background())
    step = make_step("t")
    recorder.submit(step)
    for _ in range(9):
        recorder.submit(make_step("t"))
    await recorder.flush(timeout=10)
    await recorder.close()
    assert len(threads) == 1
    assert threading.current_thread().name not in threads
    with engine.connect() as conn:
        texts = conn.exec_driver_sql("SELECT DISTINCT text FROM items WHERE direction='input'")
        assert texts.scalars().all() == ["[REDACTED]"]
    assert step.input_items[0].text != "[REDACTED]"  # the submitted record is untouched


async def test_unwritable_and_unredactable_records_are_dropped_alone(
    sqlite_database: Any, open_engine: OpenEngine, make_step: MakeStep
) -> None:
    engine = open_engine(sqlite_database.url)
    create_schema(engine)

    def transform(record: Record) -> Record:
        if record.trace_id == "boom":
            raise RuntimeError("redactor bug")
        return record

    recorder = Recorder(StoreWriter(engine), transform=transform, batch_size=50)
    poison = make_step("t", output_items=[Item(ItemKind.OTHER, attrs={"bad": {1, 2}})])
    for record in [make_step("t"), poison, make_step("boom"), make_step("t")]:
        recorder.submit(record)
    recorder.start(Background())
    await recorder.flush(timeout=10)
    assert _steps(engine) == 2
    assert recorder.dropped_total == 2
    assert recorder.write_errors_total == 2  # the batch, then the poison record alone
    await recorder.close()


async def test_close_gives_up_after_its_timeout_and_counts(
    database: Any, engine: Engine, make_step: MakeStep
) -> None:
    recorder = Recorder(StoreWriter(engine), flush_seconds=0.01)
    recorder.start(Background())
    with _locked(database):
        for _ in range(7):
            recorder.submit(make_step("t"))
        await asyncio.sleep(0.1)
        await recorder.close(timeout=0.3)
        assert recorder.dropped_total == 7
        recorder.submit(make_step("t"))
        assert recorder.dropped_total == 8
    # The write given up on ends in its thread once the lock is gone; the engine is disposed
    # after the test only when that write has given its connection back.
    await _until(lambda: engine.pool.checkedout() == 0)  # type: ignore[attr-defined]
