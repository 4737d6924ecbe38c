"""Schema migrations with Alembic: every start-up brings the database to the newest revision.

A database made before migrations existed (tables, no `alembic_version`) is adopted in
place: the first revision creates only what it lacks, and later revisions apply as usual.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate.api import AutogenContext
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from gateway.errors import StartupError
from gateway.store import mcp_tables as _mcp_tables  # noqa: F401  (registers the MCP tables)
from gateway.store import models as _models  # noqa: F401  (registers the trace tables)
from gateway.store import open_responses as _open  # noqa: F401  (registers open_responses)
from gateway.store.ledger import core as _ledger  # noqa: F401  (registers budget_ledger)
from gateway.store.models import UTCDateTime

MIGRATIONS = Path(__file__).with_name("migrations")
# Every table the store has, as revisions and `alembic revision --autogenerate` see it.
METADATA: sa.MetaData = SQLModel.metadata
# Any constant shared by every replica: serialises concurrent upgrades on PostgreSQL.
SCHEMA_LOCK_ID = 0x4C6F6F70

log = logging.getLogger(__name__)


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@functools.cache
def scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    revision = scripts().get_current_head()
    assert revision is not None, "the migrations directory has no revision"
    return revision


def upgrade_schema(engine: Engine) -> None:
    """Apply every missing revision; safe when several processes start at once."""
    # write=True: SQLite takes its write lock up front (BEGIN IMMEDIATE), so racing
    # processes upgrade one after the other and later ones find the schema current.
    with engine.connect().execution_options(write=True) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_ID)))
        current = current_revision(conn)
        if current == head():
            return
        _check_known(current)
        if current is None and sa.inspect(conn).has_table("traces"):
            log.info("database made before schema migrations: adopting it in place")
        command.upgrade(alembic_config(conn), "head")
        log.info("database schema upgraded from %s to %s", current or "empty", head())


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def _check_known(current: str | None) -> None:
    if current is None:
        return
    try:
        scripts().get_revision(current)
    except CommandError:
        raise StartupError(
            f"the database schema is at revision {current}, which this loopwatch does not "
            f"know (its newest is {head()}): a newer loopwatch upgraded it"
        ) from None


# Search structures the models do not describe (an FTS5 table, PostgreSQL's stored words of
# an item and their index): revisions own them, so comparing with the models leaves them out.
SEARCH_OBJECTS = ("items_fts", "ix_items_search", "search_words")


# PostgreSQL's opt-in time partitions (gateway.store.partitions.convert), which the models do
# not describe: the partitions (named `<table>__<suffix>`) and the index of traces by placement.
# A converted store's widened keys and dropped foreign keys differ from the models on purpose.
_PARTITIONING = ("ix_traces_placed",)


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    table = obj if type_ == "table" else getattr(obj, "table", None)
    outside = "__" in str(getattr(table, "name", "")) or "__" in (name or "")
    return not ((name or "").startswith(SEARCH_OBJECTS + _PARTITIONING) or outside)


def render_item(kind: str, value: Any, context: AutogenContext) -> str | Literal[False]:
    """Revisions spell our column types in plain SQLAlchemy, so they never import models."""
    if kind == "type" and isinstance(value, UTCDateTime):
        return "sa.DateTime()"
    return False
