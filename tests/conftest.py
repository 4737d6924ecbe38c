"""Shared fixtures: databases (SQLite file and a fresh PostgreSQL schema) and the step builder."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import Engine

from gateway.step import StepRecord
from gateway.store.engine import create_schema, make_engine
from tests.factories import build_step

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
OpenEngine = Callable[..., Engine]
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


@pytest.fixture
def open_engine() -> Iterator[OpenEngine]:
    """`make_engine` for tests that need engines of their own: each one disposed after the
    test, failed or not, so no pooled connection outlives it."""
    engines: list[Engine] = []

    def open_(url: str, **kwargs: Any) -> Engine:
        engines.append(make_engine(url, **kwargs))
        return engines[-1]

    yield open_
    for engine in engines:
        engine.dispose()


@pytest.fixture
def make_step() -> Callable[..., StepRecord]:
    """The step builder (see `build_step`), as a fixture for test modules."""
    return build_step
