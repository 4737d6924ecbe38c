"""Key epochs: the indexes on random keys (continuation key, response and provider request
ids, call ids) lead with `key_epoch`, a number stored on each step and its items that moves
on every `EPOCH_STEPS` steps.

Why: an index on random keys puts each insert on a leaf of its own once it outgrows a batch,
so a batch writes (and, past the cache, first reads) a page per key whatever its size. With
the epoch in front, a batch's keys go into the newest epoch's subtree, which stays small
and cached: the write cost a step stays that of a small store however large the store grows.
A lookup by key then seeks each epoch: `key_epoch IN (oldest .. newest)`, read from the
same indexes' ends (two seeks), one B-tree descent an epoch.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store.models import STEPS

# Small enough that the newest epoch's part of each index stays a few hundred pages (a batch
# of 200 steps then touches most of them, as in a store of this size); large enough that a
# lookup at 1M steps seeks about 120 epochs.
EPOCH_STEPS = 8192


def stored_epochs(conn: Connection) -> list[int]:
    """Every epoch that may hold rows, oldest first (empty for an empty store)."""
    epoch = STEPS.c.key_epoch
    bounds = sa.select(
        sa.select(sa.func.min(epoch)).scalar_subquery(),
        sa.select(sa.func.max(epoch)).scalar_subquery(),
    )
    oldest, newest = conn.execute(bounds).one()
    return [] if oldest is None else list(range(oldest, newest + 1))


def epoch_for_batch(conn: Connection) -> int:
    """The epoch a new batch's steps and items take: the newest, until it holds
    `EPOCH_STEPS` steps, then the next. Read inside the batch's write transaction, so
    writers that take turns agree; a batch is never split, so an epoch may pass the size by
    less than a batch."""
    epoch = STEPS.c.key_epoch
    newest = conn.scalar(sa.select(sa.func.max(epoch)))
    if newest is None:
        return 0
    # Counted from the epoch's index entries alone, and no further than the size: an epoch
    # a migration filled (every older row) may hold millions.
    held = sa.select(sa.literal(1)).where(epoch == newest).limit(EPOCH_STEPS).subquery()
    full = (conn.scalar(sa.select(sa.func.count()).select_from(held)) or 0) >= EPOCH_STEPS
    return int(newest) + 1 if full else int(newest)
