"""The key filter's start-up walks: every stored continuation key and emitted call id, read
in index order from the indexes alone (no row lookups), a bounded batch at a time."""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from gateway.store.models import ITEMS, STEPS
from gateway.store.read.queries import reading


def emitted_call_id_batches(engine: Engine, batch: int = 10_000) -> Iterator[list[str]]:
    """Every tool call id a recorded step emitted, in index order (by key epoch, then id), in
    bounded batches: read from the index on (key_epoch, call_id, direction, kind) alone,
    without the items' rows."""
    i = ITEMS.c
    emitted = (i.direction == "output", i.kind == "tool_call")
    yield from _index_walk(engine, i.key_epoch, i.call_id, emitted, batch)


def continuation_key_batches(engine: Engine, batch: int = 10_000) -> Iterator[list[str]]:
    """Every stored continuation key, in index order (by key epoch, then key), in bounded
    batches from its index."""
    s = STEPS.c
    yield from _index_walk(engine, s.key_epoch, s.continuation_key, (), batch)


def _index_walk(
    engine: Engine,
    epoch: sa.ColumnElement[int],
    key: sa.ColumnElement[str],
    where: tuple[sa.ColumnElement[bool], ...],
    batch: int,
) -> Iterator[list[str]]:
    """The keys of an index on (epoch, key, ...) in its order, `batch` at a time, each batch
    a seek past the last (epoch, key) read and a short scan."""
    after: tuple[int, str] = (-1, "")
    while True:
        query = (
            sa.select(epoch, key)
            .where(sa.tuple_(epoch, key) > after, key.is_not(None), *where)
            .order_by(epoch, key)
            .limit(batch)
        )
        with reading(engine) as conn:
            rows = conn.execute(query).all()
        yield [row[1] for row in rows]
        if len(rows) < batch:
            return
        after = (rows[-1][0], rows[-1][1])
