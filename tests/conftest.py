"""Shared fixtures: databases (SQLite file and a fresh PostgreSQL schema) and step builders."""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import Engine

from gateway.items import Item, ItemKind, StopReason, Usage
from gateway.step import StepRecord
from gateway.store.engine import create_schema, make_engine

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
_pg_problem: list[str] = []  # memo of the first reachability probe, per session


def _postgres_problem() -> str | None:
    if not _pg_problem:
        try:
            psycopg.connect(PG_URL, connect_timeout=2).close()
            _pg_problem.append("")
        except psycopg.Error as exc:
            _pg_problem.append(str(exc).strip() or type(exc).__name__)
    return _pg_problem[0] or None


@dataclass(frozen=True)
class Database:
    """Where a test's tables live; `raw_connect()` opens a driver connection to the same place."""

    dialect: str  # sqlite | postgresql
    url: str
    path: Path | None = None  # SQLite file
    schema: str | None = None  # PostgreSQL schema

    def raw_connect(self) -> Any:
        if self.path is not None:
            return sqlite3.connect(self.path, isolation_level=None, timeout=10)
        return psycopg.connect(PG_URL, options=f"-csearch_path={self.schema}", autocommit=True)

    def engine_url(self, **pg_settings: str) -> str:
        """The URL plus PostgreSQL session settings (e.g. lock_timeout), ignored on SQLite."""
        if self.schema is None or not pg_settings:
            return self.url
        extra = "".join(f"%20-c{key}%3D{value}" for key, value in pg_settings.items())
        return self.url + extra


def _sqlite(tmp_path: Path) -> Database:
    path = tmp_path / "loopwatch.db"
    return Database("sqlite", f"sqlite:///{path}", path=path)


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Database:
    return _sqlite(tmp_path)


@pytest.fixture
def postgres_database() -> Iterator[Database]:
    """A fresh schema per test, dropped afterwards; skips when PostgreSQL is unreachable."""
    problem = _postgres_problem()
    if problem is not None:
        pytest.skip(f"PostgreSQL not reachable at 127.0.0.1:5432: {problem}")
    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield Database("postgresql", f"{PG_URL}?options=-csearch_path%3D{schema}", schema=schema)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """Each test using it runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    db: Database = request.getfixturevalue("postgres_database")
    return db


@pytest.fixture
def database_url(database: Database) -> str:
    """The one database URL fixture: the gateway's store in tests that start one."""
    return database.url


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `sqlite` (they read the database file, say) run on SQLite alone."""
    if "database" in metafunc.fixturenames and metafunc.definition.get_closest_marker("sqlite"):
        sqlite_only = pytest.mark.parametrize("database", ["sqlite"], indirect=True)
        metafunc.definition.add_marker(sqlite_only)


@pytest.fixture
def engine(database: Database) -> Iterator[Engine]:
    """An engine with the schema created, disposed after the test."""
    engine = make_engine(database.url)
    create_schema(engine)
    yield engine
    engine.dispose()


_counter = itertools.count(1)
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def build_step(
    trace_id: str = "trace-1",
    *,
    step_id: str | None = None,
    at: datetime | None = None,
    items: int = 2,
    model: str | None = "gpt-4o",
    **fields: Any,
) -> StepRecord:
    """A realistic step: a user turn in, an assistant text and a tool call out."""
    n = next(_counter)
    inputs = [
        Item(ItemKind.USER, role="user", text=f"question {n}.{i}", attrs={"i": i})
        for i in range(items)
    ]
    outputs = [
        Item(ItemKind.ASSISTANT_TEXT, role="assistant", text=f"answer {n}"),
        Item(
            ItemKind.TOOL_CALL,
            role="assistant",
            call_id=f"call_{n}",
            tool_name="search",
            arguments='{"q": "x"}',
        ),
    ]
    values: dict[str, Any] = {
        "id": step_id or f"step-{uuid.uuid4().hex}",
        "trace_id": trace_id,
        "protocol": "chat",
        "method": "POST",
        "path": "/v1/chat/completions",
        "started_at": at or T0 + timedelta(seconds=n),
        "model": model,
        "stream": True,
        "http_status": 200,
        "stop_reason": StopReason.TOOL_CALLS,
        "raw_stop_reason": "tool_calls",
        "usage": Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cached_tokens=2),
        "latency_ms": 120.5,
        "ttft_ms": 40.0,
        "input_items": inputs,
        "output_items": outputs,
    }
    values.update(fields)
    return StepRecord(**values)


@pytest.fixture
def make_step() -> Callable[..., StepRecord]:
    """The step builder (see `build_step`), as a fixture for test modules."""
    return build_step
