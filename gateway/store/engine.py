"""Database engines (SQLite or PostgreSQL), the schema (by migrations) and the install secret."""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine

from gateway.store.models import META

if TYPE_CHECKING:  # a SQLite gateway never loads the PostgreSQL dialect
    from sqlalchemy.dialects import postgresql

SECRET_KEY = "continuation_secret"
CONNECT_TIMEOUT = 10  # seconds to reach PostgreSQL (a URL's own connect_timeout wins)


def normalize_url(database_url: str) -> str:
    """Map the user-facing `postgresql://` (or `postgres://`) to the psycopg 3 driver."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            return "postgresql+psycopg://" + database_url[len(prefix) :]
    return database_url


def make_engine(database_url: str, *, busy_timeout_ms: int = 5000) -> Engine:
    url = normalize_url(database_url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url, busy_timeout_ms)
    # pre_ping: a replica survives a database restart without surfacing dead connections.
    # connect_timeout: an unreachable host fails in seconds, not after the TCP default.
    connect_args = {} if "connect_timeout=" in url else {"connect_timeout": CONNECT_TIMEOUT}
    return sa.create_engine(
        url, pool_pre_ping=True, pool_size=5, max_overflow=20, connect_args=connect_args
    )


def read_only_engine(database_url: str) -> Engine:
    """An engine that never writes; on SQLite it cannot even create the file."""
    url = sa.engine.make_url(normalize_url(database_url))
    if url.get_backend_name() != "sqlite":
        return make_engine(database_url)
    path = urllib.parse.quote(url.database or "")
    return sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")


def _sqlite_engine(url: str, busy_timeout_ms: int) -> Engine:
    engine = sa.create_engine(url, connect_args={"timeout": busy_timeout_ms / 1000})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's implicit BEGIN is deferred and only precedes DML, so a writer could
        # fail to upgrade its read lock (busy_timeout does not apply then) and DDL would run
        # outside transactions. We emit BEGIN ourselves in `_on_begin`.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        _use_wal(cursor, busy_timeout_ms / 1000)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = "IMMEDIATE" if connection.get_execution_options().get("write") else "DEFERRED"
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


def _use_wal(cursor: Any, timeout: float) -> None:
    """Switch a new database file to WAL (a mode the file keeps), waiting out racing starts.

    The switch needs the file to itself, and SQLite answers "database is locked" at once,
    without its busy handler, while another process opens or switches the same new file.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# The batch writer's own settings (SQLite). The indexes of random keys (provider ids, call
# ids, continuation keys, argument hashes) put each insert on a leaf page of its own once
# they outgrow a batch, so a batch dirties about one page an insert: a cache that keeps
# their inner pages and hot leaves spares re-reading them every batch (the default 2 MiB
# holds neither past 100k steps), and checkpoints every 64 MiB of WAL instead of every 4 MiB
# write a leaf that several batches changed to the database file once. The cache fills only
# as pages are read; the WAL file is cut back to the same 64 MiB after a checkpoint.
BATCH_WRITER_PRAGMAS = (
    "PRAGMA cache_size=-65536",  # KiB
    "PRAGMA wal_autocheckpoint=16384",  # pages of 4 KiB
    "PRAGMA journal_size_limit=67108864",  # bytes
)


def tune_for_batches(conn: Connection) -> None:
    """Give the batch writer's connection its settings, once per database connection."""
    if conn.dialect.name != "sqlite":
        return
    info = conn.connection.info
    if info.get("batch_writer"):
        return
    for pragma in BATCH_WRITER_PRAGMAS:
        conn.exec_driver_sql(pragma).close()
    info["batch_writer"] = True


def write_connection(engine: Engine) -> Connection:
    """A connection whose transactions take the write lock up front (SQLite BEGIN IMMEDIATE)."""
    return engine.connect().execution_options(write=True)


def create_schema(engine: Engine) -> None:
    """Bring the schema to the newest migration; safe when several processes start at once."""
    if at_newest_revision(engine):
        return  # the usual restart: Alembic (about 9 MB resident, for good) is not loaded
    # Imported here: the recorder process writes rows and never migrates (no alembic there).
    from gateway.store.migrate import upgrade_schema

    upgrade_schema(engine)


def newest_revisions() -> set[str]:
    """The heads of the migrations directory, read from the revision files' own lines."""
    revisions: set[str] = set()
    replaced: set[str] = set()
    for path in (Path(__file__).parent / "migrations" / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revisions.update(_REVISION.findall(text))
        for line in _DOWN_REVISION.findall(text):
            replaced.update(_QUOTED.findall(line))
    return revisions - replaced


_REVISION = re.compile(r'^revision\b[^=\n]*=\s*"([^"]+)"', re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\b[^=\n]*=(.*)$", re.MULTILINE)
_QUOTED = re.compile(r'"([^"]+)"')


def at_newest_revision(engine: Engine) -> bool:
    """Whether the database already is at the newest migration (read with plain SQL)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return False
        stored = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()
        return set(stored) == newest_revisions()


def install_secret(engine: Engine) -> bytes:
    """Read, or create once per install, the HMAC key of continuation keys."""
    with write_connection(engine) as conn, conn.begin():
        value = conn.execute(sa.select(META.c.value).where(META.c.key == SECRET_KEY)).scalar()
        if value is None:
            insert = dialect_insert(conn, META).values(key=SECRET_KEY, value=secrets.token_hex(32))
            conn.execute(insert.on_conflict_do_nothing(index_elements=["key"]))
            # Another replica may have won the race: read back whichever value is stored.
            value = conn.execute(
                sa.select(META.c.value).where(META.c.key == SECRET_KEY)
            ).scalar_one()
    return bytes.fromhex(value)


def read_secret(engine: Engine) -> bytes | None:
    """The install secret if the database holds one; never creates it (nor any table)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(META.name):
            return None
        value = conn.execute(sa.select(META.c.value).where(META.c.key == SECRET_KEY)).scalar()
    return None if value is None else bytes.fromhex(value)


def dialect_insert(conn: Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """INSERT with ON CONFLICT support in the connection's dialect."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    return sqlite.insert(table)
