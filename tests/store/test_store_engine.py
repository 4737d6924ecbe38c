"""Engines, schema creation and the install secret, including two processes starting at once."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.step import StepRecord
from gateway.store.engine import create_schema, install_secret, normalize_url, read_only_engine
from gateway.store.models import STEPS
from gateway.store.write.writer import StoreWriter
from tests.conftest import OpenEngine


def test_urls_map_to_psycopg() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///./x.db") == "sqlite:///./x.db"


def _at_once(count: int, function: Callable[[], Any]) -> list[Any]:
    barrier = threading.Barrier(count)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        barrier.wait()
        try:
            results.append(function())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def test_schema_and_secret_race_safe(database_url: str, open_engine: OpenEngine) -> None:
    engines = [open_engine(database_url) for _ in range(4)]
    it = iter(engines)
    lock = threading.Lock()

    def start_replica() -> bytes:
        with lock:
            engine = next(it)
        create_schema(engine)
        return install_secret(engine)

    secrets = _at_once(4, start_replica)
    assert len(secrets) == 4
    assert len(set(secrets)) == 1
    assert len(secrets[0]) == 32
    create_schema(engines[0])  # idempotent
    assert install_secret(engines[0]) == secrets[0]


def test_sqlite_pragmas(sqlite_database: Any, open_engine: OpenEngine) -> None:
    engine = open_engine(sqlite_database.url, busy_timeout_ms=1234)
    with engine.connect() as conn:

        def pragma(name: str) -> Any:
            return conn.exec_driver_sql(f"PRAGMA {name}").scalar()

        assert pragma("journal_mode") == "wal"
        assert pragma("busy_timeout") == 1234
        assert pragma("synchronous") == 1  # NORMAL
        assert pragma("foreign_keys") == 1


def test_schema_has_the_indexes_the_read_api_uses(engine: Engine) -> None:
    inspector = sa.inspect(engine)
    indexes = {
        table: {tuple(ix["column_names"]) for ix in inspector.get_indexes(table)}
        for table in ("traces", "steps", "items", "violations")
    }
    assert ("updated_at", "id") in indexes["traces"]
    assert ("status", "updated_at", "id") in indexes["traces"]
    # Random keys behind the key epoch (revision 0013).
    assert {("key_epoch", "continuation_key"), ("key_epoch", "response_id")} <= indexes["steps"]
    assert ("key_epoch", "provider_request_id") in indexes["steps"]
    unique = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("steps")}
    assert ("trace_id", "seq") in unique  # a trace's steps, in order
    assert {("step_id",), ("key_epoch", "call_id", "direction", "kind")} <= indexes["items"]
    assert ("key_epoch", "args_key") in indexes["items"]
    # Each index costs every write: none that no query uses (revision 0008).
    assert not {("trace_id",), ("model", "trace_id")} & indexes["steps"]
    assert ("call_id",) not in indexes["items"]
    assert ("kind", "created_at", "id") in indexes["violations"]
    assert ("trace_id",) in indexes["violations"]


def test_batch_writer_connection_caches_more_and_checkpoints_less_often(
    sqlite_database: Any, open_engine: OpenEngine, make_step: Callable[..., StepRecord]
) -> None:
    engine = open_engine(sqlite_database.url)
    create_schema(engine)
    StoreWriter(engine).write_batch([make_step("t-tuned")])
    with engine.connect() as conn:  # the pool's one connection: the one the batch used

        def pragma(name: str) -> Any:
            return conn.exec_driver_sql(f"PRAGMA {name}").scalar()

        assert pragma("cache_size") == -65536  # KiB
        assert pragma("wal_autocheckpoint") == 16384  # pages
        assert pragma("journal_size_limit") == 64 * 1024 * 1024
    other = open_engine(sqlite_database.url)
    with other.connect() as conn:  # readers and other writers keep SQLite's defaults
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -2000


def test_batches_are_read_before_a_checkpoint_and_in_the_file_after_the_writer_stops(
    sqlite_database: Any, open_engine: OpenEngine, make_step: Callable[..., StepRecord]
) -> None:
    engine = open_engine(sqlite_database.url)
    create_schema(engine)
    writer = StoreWriter(engine)
    for batch in range(5):
        writer.write_batch([make_step(f"t-{batch}-{n}") for n in range(20)])
    wal = Path(f"{sqlite_database.path}-wal")
    assert wal.stat().st_size > 0  # not checkpointed yet: readers find the rows in the WAL
    reader = read_only_engine(sqlite_database.url)
    with reader.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(STEPS)) == 100
    reader.dispose()
    engine.dispose()  # the last connection checkpoints the WAL into the file
    assert not wal.exists()
    with contextlib.closing(sqlite3.connect(sqlite_database.path)) as raw:
        assert raw.execute("SELECT count(*) FROM steps").fetchone()[0] == 100
