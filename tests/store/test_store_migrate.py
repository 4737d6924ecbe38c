"""Schema migrations: the first revision is the schema made before migrations, the newest
matches the models, and databases made before migrations are adopted with their traces
(by a running gateway: tests/e2e/store/test_gateway_migrate.py)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine

from gateway.errors import StartupError
from gateway.store.engine import (
    at_newest_revision,
    create_schema,
    make_engine,
    newest_revisions,
)
from gateway.store.migrate import (
    METADATA,
    alembic_config,
    current_revision,
    head,
    include_object,
)
from gateway.store.read.queries import get_trace
from tests.conftest import Database, OpenEngine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "db"
SQLITE_BEFORE = FIXTURES / "before-migrations.sqlite"
POSTGRES_BEFORE = FIXTURES / "before-migrations.postgresql.sql"


def load_database_before_migrations(database: Database, tmp_path: Path) -> str:
    """A copy of the fixture made by loopwatch 0.1.0 (create_all), at `database`'s place."""
    if database.path is not None:
        shutil.copy(SQLITE_BEFORE, database.path)
        return database.url
    with database.raw_connect() as conn:
        conn.execute(POSTGRES_BEFORE.read_text())
    return database.url


def schema_of(engine: Engine) -> dict[str, Any]:
    """Tables, columns, keys and indexes as the database reports them (not as models say)."""
    inspector = sa.inspect(engine)
    schema: dict[str, Any] = {}
    for table in inspector.get_table_names():
        if table == "alembic_version":
            continue
        schema[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                for c in inspector.get_columns(table)
            ],
            "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
            "foreign_keys": sorted(
                (
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    fk.get("options", {}).get("ondelete"),
                )
                for fk in inspector.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (ix["name"], tuple(ix["column_names"]), bool(ix["unique"]))
                for ix in inspector.get_indexes(table)
            ),
            "unique": sorted(
                (uc["name"], tuple(uc["column_names"]))
                for uc in inspector.get_unique_constraints(table)
            ),
        }
    return schema


def _rows(engine: Engine, table: str) -> list[Any]:
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text(f"SELECT * FROM {table}")).all(), key=repr)


def _as_text(engine: Engine, table: str, columns: list[str] | None = None) -> set[str]:
    """Rows as text, of the given columns only (later revisions add columns)."""
    rows = [row._mapping for row in _rows(engine, table)]
    names = columns if columns is not None else (list(rows[0]) if rows else [])
    return {repr(tuple(row[name] for name in names)) for row in rows}


def _columns(engine: Engine, table: str) -> list[str]:
    # Revision 0002 renames the statuses shown as `ok` and `error`: compared apart.
    return [
        c["name"]
        for c in sa.inspect(engine).get_columns(table)
        if (table, c["name"]) != ("traces", "status")
    ]


# Tables that revisions after 0001 create (so no database made before migrations has them).
TABLES_OF_LATER_REVISIONS = {
    "tool_sets",  # 0004
    "mcp_executions",  # 0005, and below
    "mcp_methods",
    "mcp_tools",
    "mcp_violations",
    "trace_models",  # 0007
    "sessions",
    "open_responses",  # 0018
}


def test_first_revision_is_the_schema_made_before_migrations(
    database: Database, tmp_path: Path, open_engine: OpenEngine
) -> None:
    before = open_engine(load_database_before_migrations(database, tmp_path))
    expected = schema_of(before)
    with before.begin() as conn:  # the same place, emptied, then built by revision 0001
        METADATA.drop_all(conn)
    with before.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
    assert schema_of(before) == expected
    assert set(expected) == set(METADATA.tables) - TABLES_OF_LATER_REVISIONS


def test_newest_revision_matches_the_models(engine: Engine) -> None:
    """A model change without a revision fails here: write one (docs/operations.md, Schema
    migrations)."""
    with engine.connect() as conn:
        assert current_revision(conn) == head()
        differences = compare_metadata(
            MigrationContext.configure(
                conn, opts={"compare_type": True, "include_object": include_object}
            ),
            METADATA,
        )
    assert differences == []


def test_a_partial_database_gets_its_missing_tables(
    sqlite_database: Database, open_engine: OpenEngine
) -> None:
    """`loopwatch key-fingerprint` used to create the trace tables without the ledger."""
    engine = open_engine(sqlite_database.url)
    with engine.begin() as conn:  # the schema of then, without the ledger and any revision
        command.upgrade(alembic_config(conn), "0001")
        conn.execute(sa.text("DROP TABLE budget_ledger"))
        conn.execute(sa.text("DROP TABLE alembic_version"))
    create_schema(engine)
    names = {n for n in sa.inspect(engine).get_table_names() if not n.startswith("items_fts")}
    assert names == {*METADATA.tables, "alembic_version"}


def test_a_schema_newer_than_this_code_stops_start_up(
    sqlite_database: Database, open_engine: OpenEngine
) -> None:
    engine = open_engine(sqlite_database.url)
    create_schema(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'f00dfeed'"))
    with pytest.raises(StartupError, match="revision f00dfeed, which this loopwatch does not"):
        create_schema(engine)


def test_a_restart_finds_the_newest_revision_without_alembic(sqlite_database: Database) -> None:
    """The check a restart makes before loading Alembic agrees with Alembic's own head."""
    engine = make_engine(sqlite_database.url)
    assert newest_revisions() == {head()}
    assert not at_newest_revision(engine)  # an empty database
    create_schema(engine)
    assert at_newest_revision(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0001'"))
    assert not at_newest_revision(engine)
    engine.dispose()


def test_fixture_databases_were_made_before_migrations() -> None:
    """The fixtures stand for old installs: no alembic_version, every table but it."""
    with sqlite3.connect(SQLITE_BEFORE) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == set(METADATA.tables) - TABLES_OF_LATER_REVISIONS
    assert "CREATE TABLE alembic_version" not in POSTGRES_BEFORE.read_text()


def test_revision_0015_adds_step_attrs_and_leaves_the_steps_stored_before_without(
    database: Database, tmp_path: Path, open_engine: OpenEngine
) -> None:
    engine = open_engine(load_database_before_migrations(database, tmp_path))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0014")
    assert "attrs" not in {c["name"] for c in sa.inspect(engine).get_columns("steps")}
    before = _as_text(engine, "steps", _columns(engine, "steps"))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0015")
    (attrs,) = [c for c in sa.inspect(engine).get_columns("steps") if c["name"] == "attrs"]
    assert attrs["nullable"]
    assert _as_text(engine, "steps", [c for c in _columns(engine, "steps") if c != "attrs"]) == (
        before
    )
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT attrs FROM steps")).scalars().all()
    assert stored and set(stored) == {None}
    with engine.begin() as conn:  # the read side reads the newest schema
        command.upgrade(alembic_config(conn), "head")
    trace_id = _rows(engine, "traces")[0].id
    steps = (get_trace(engine, trace_id) or {})["steps"]
    assert steps and all(step["attrs"] == {} for step in steps)  # read as having none


def test_revision_0016_adds_an_indexed_conversation_id_null_on_steps_stored_before(
    database: Database, tmp_path: Path, open_engine: OpenEngine
) -> None:
    engine = open_engine(load_database_before_migrations(database, tmp_path))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0015")
    before = _as_text(engine, "steps", _columns(engine, "steps"))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0016")
    inspector = sa.inspect(engine)
    (column,) = [c for c in inspector.get_columns("steps") if c["name"] == "conversation_id"]
    assert column["nullable"]
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("steps")}
    assert indexes["ix_steps_conversation_id"] == ["key_epoch", "conversation_id"]
    kept = [c for c in _columns(engine, "steps") if c != "conversation_id"]
    assert _as_text(engine, "steps", kept) == before
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT conversation_id FROM steps")).scalars().all()
    assert stored and set(stored) == {None}


def test_revision_0017_adds_an_indexed_held_state_null_on_steps_stored_before(
    database: Database, tmp_path: Path, open_engine: OpenEngine
) -> None:
    engine = open_engine(load_database_before_migrations(database, tmp_path))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0016")
    before = _as_text(engine, "steps", _columns(engine, "steps"))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0017")
    inspector = sa.inspect(engine)
    (column,) = [c for c in inspector.get_columns("steps") if c["name"] == "held_state"]
    assert column["nullable"]
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("steps")}
    assert indexes["ix_steps_held_state"] == ["key_epoch", "held_state"]
    kept = [c for c in _columns(engine, "steps") if c != "held_state"]
    assert _as_text(engine, "steps", kept) == before
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT held_state FROM steps")).scalars().all()
    assert stored and set(stored) == {None}


def test_revision_0019_adds_a_traces_place_in_its_tree_stored_ones_roots(
    database: Database, tmp_path: Path, open_engine: OpenEngine
) -> None:
    engine = open_engine(load_database_before_migrations(database, tmp_path))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0018")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0019")
    inspector = sa.inspect(engine)
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("traces")}
    assert indexes["ix_traces_parent"] == ["parent_trace_id"]
    assert indexes["ix_traces_root"] == ["root_trace_id"]
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT parent_trace_id, depth FROM traces")).all()
    assert rows and set(rows) == {(None, 0)}
