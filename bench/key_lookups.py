"""The gateway's store lookups by random key on a filled store: placement's continuation
keys, `previous_response_id`, emitted call ids, a step by provider request id, the id
prefix lookup, and the key filter's walks at start-up; per lookup, CPU and wall time.

Keys are sampled from the store (hits), each continuation lookup asking for three keys
that miss before the one that hits, as placement lists them shortest first.

Usage: python bench/key_lookups.py --database-url URL [--lookups 300]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.store.engine import make_engine
from gateway.store.models import ITEMS, STEPS
from gateway.store.read import key_walks, listing, queries


def sample(engine: sa.Engine, column: sa.Column[Any], count: int, *where: Any) -> list[str]:
    """`count` values of `column` from rows spread over the whole store (by SQLite's rowid,
    PostgreSQL's ctid: the order rows were stored in)."""
    table = column.table
    row = "rowid" if engine.dialect.name == "sqlite" else "ctid"
    if row == "ctid":  # pages, not rows: a random page at or after a random one
        return _sample_pages(engine, column, count, *where)
    with engine.connect() as conn:
        top = conn.scalar(sa.select(sa.func.max(sa.literal_column("rowid"))).select_from(table))
        rng = random.Random(7)
        found: list[str] = []
        while len(found) < count:
            at = rng.randint(1, int(top or 1))
            query = sa.select(column).where(sa.literal_column("rowid") >= at, column.is_not(None))
            value = conn.scalar(query.where(*where).limit(1))
            if value is not None:
                found.append(value)
    return found


def _sample_pages(engine: sa.Engine, column: sa.Column[Any], count: int, *where: Any) -> list[str]:
    table = column.table
    with engine.connect() as conn:
        pages = conn.scalar(
            sa.text(f"SELECT relpages FROM pg_class WHERE relname = '{table.name}'")
        )
        rng = random.Random(7)
        found: list[str] = []
        while len(found) < count:
            at = sa.literal_column(f"'({rng.randint(0, max(int(pages or 1) - 1, 0))},0)'::tid")
            query = sa.select(column).where(sa.literal_column("ctid") >= at, column.is_not(None))
            value = conn.scalar(query.where(*where).limit(1))
            if value is not None:
                found.append(value)
    return found


def timed(name: str, lookup: Callable[[Any], Any], values: list[Any]) -> None:
    walls, cpus = [], []
    for value in values:
        wall, cpu = time.perf_counter(), time.process_time()
        assert lookup(value), f"{name}: {value} not found"
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    walls.sort()
    p95 = walls[int(len(walls) * 0.95) - 1]
    print(
        f"  {name:>26}: median {statistics.median(walls) * 1000:6.2f} ms, "
        f"p95 {p95 * 1000:6.2f} ms wall; CPU median {statistics.median(cpus) * 1000:6.2f} ms"
    )


def main(args: argparse.Namespace) -> None:
    engine = make_engine(args.database_url)
    n = args.lookups
    keys = sample(engine, STEPS.c.continuation_key, n)
    responses = sample(engine, STEPS.c.response_id, n)
    requests = sample(engine, STEPS.c.provider_request_id, n)
    emitted = (ITEMS.c.direction == "output", ITEMS.c.kind == "tool_call")
    calls = sample(engine, ITEMS.c.call_id, n, *emitted)
    print(f"{args.database_url}: {n} lookups each, load {os.getloadavg()[0]:.1f}")
    timed(
        "continuation (4 keys)",
        lambda k: queries.find_continuation(engine, [f"miss-{i}-{k}" for i in range(3)] + [k]),
        keys,
    )
    timed("previous_response_id", lambda r: queries.find_by_response_id(engine, r), responses)
    timed("call emitters (1 id)", lambda c: queries.call_emitters(engine, [c]), calls)
    timed("step by request id", lambda r: queries.find_step(engine, r), requests)
    timed("prefix (response id)", lambda r: listing.find_prefix(engine, r[:20]), responses)
    timed("call id (exact)", lambda c: listing.find_prefix(engine, c), calls[: n // 3])
    for name, walk in (
        ("continuation key walk", key_walks.continuation_key_batches),
        ("emitted call id walk", key_walks.emitted_call_id_batches),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        total = sum(len(batch) for batch in walk(engine))
        print(
            f"  {name:>26}: {total:,} keys in {time.perf_counter() - wall:.2f} s wall, "
            f"{time.process_time() - cpu:.2f} s CPU"
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--lookups", type=int, default=300)
    main(parser.parse_args())
