"""Which models each trace used, a row per (trace, model): the list's `model=` filter finds
the few model names that match, then seeks their traces by index instead of reading every
trace's model list."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.models import TRACE_MODELS, TRACES
from gateway.store.write.rows import placeholder

# Traces of the wanted models under which the list reads them all and sorts them, rather
# than walking the newest traces for them (a page then probes at most traces / FEW a row).
FEW = 2000


class ModelsOfTrace(Protocol):
    """What a batch adds to one trace, as far as its models go."""

    @property
    def trace_id(self) -> str: ...

    @property
    def models(self) -> list[str]: ...


def record(conn: Connection, deltas: Iterable[ModelsOfTrace]) -> None:
    """The batch's models of each trace, in the writer's transaction; known ones are kept."""
    rows = [(d.trace_id, model) for d in deltas for model in d.models]
    if rows:  # at the driver: no statement compiled per batch
        mark = placeholder(conn)
        conn.exec_driver_sql(
            f"INSERT INTO trace_models (trace_id, model) VALUES ({mark}, {mark}) "
            "ON CONFLICT (trace_id, model) DO NOTHING",
            rows,
        )


def model_names(conn: Connection) -> list[str]:
    """Every distinct model name, one index seek each (a loose index scan): a store holds
    millions of (trace, model) rows but only a few dozen names."""
    return [name for name in conn.scalars(_names_query()) if name is not None]


@functools.cache
def _names_query() -> sa.Select[Any]:
    m = TRACE_MODELS.c
    first = sa.select(sa.func.min(m.model).label("model")).cte("names", recursive=True)
    following = (
        sa.select(m.model)
        .where(m.model > first.c.model)
        .order_by(m.model)
        .limit(1)
        .scalar_subquery()
    )
    names = first.union_all(sa.select(following).where(first.c.model.is_not(None)))
    return sa.select(names.c.model)


def matching(conn: Connection, text: str) -> list[str]:
    """The model names that contain `text`, any case."""
    wanted = text.lower()
    return [name for name in model_names(conn) if wanted in name.lower()]


def used_any(conn: Connection, names: Sequence[str]) -> Any:
    """The condition on TRACES: the trace used one of these models. Shaped by how many
    traces that is, so either way the page reads few rows: a few traces are read by id and
    sorted; many are met walking the list newest first, each checked by its key."""
    if not names:
        return sa.false()
    m = TRACE_MODELS.c
    used = sa.select(m.trace_id).where(m.model.in_(list(names)))
    few = sa.select(sa.func.count()).select_from(used.limit(FEW).subquery())
    if (conn.scalar(few) or 0) < FEW:
        return TRACES.c.id.in_(used)
    return sa.exists().where(m.trace_id == TRACES.c.id, m.model.in_(list(names)))


def filter_on(conn: Connection, text: str) -> Any:
    """The list's `model=` condition: traces that used a model whose name contains `text`."""
    return used_any(conn, matching(conn, text))
