"""Where a batch's write cost goes on a filled PostgreSQL store: for each variant, a fresh copy
of the store (`CREATE DATABASE … TEMPLATE`) with one index, key or setting changed takes the
same batches through the production writer; printed per variant: steps/s wall, steps per
CPU-second of this process plus the server's backends for the copy, the server's share,
and how much the copy grew a step.

Fill the store first with `store_scale.py --database-url … --no-reads --no-retention`.
Variants (join with `+`): `base` (as it is), `no-<index>` (that index dropped), `no-fk`
(the foreign keys of steps, items, violations and trace_models dropped), `no-words` (the
items' stored words and their GIN index dropped), `written-words` (revision 0014 on a
store from before it: the writer cuts the words, not the server), `words-trigger` (a
trigger making the words of rows written without them), `gin-fastupdate=off`, `gin-pending=KB`
(the GIN index's pending list), `set:<name>=<value>` (a setting of the writer's sessions),
`sql:<statement>` (any statement on the copy). Rounds repeat the list, so drift in the
machine's load shows. Every copy is dropped after its run.

Usage: python bench/pg_write_ab.py postgresql://…/STORE [--steps 10000] [--rounds 2]
       [--variants base,no-fk,no-words]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from idle_cpu import cpu_seconds
from store_workload import Workload

from gateway.store.engine import make_engine
from gateway.store.write.writer import StoreWriter

BATCH = 200  # the recorder's batch size
WARM_UP = 5  # batches written before the timed ones: the copy's pages come into the cache
FOREIGN_KEYS = (
    ("items", "items_step_id_fkey"),
    ("steps", "steps_trace_id_fkey"),
    ("violations", "violations_trace_id_fkey"),
    ("trace_models", "trace_models_trace_id_fkey"),
)


class Variant:
    """One variant's changes: SQL on the copy before writing, settings of the writer's
    sessions."""

    def __init__(self, spec: str) -> None:
        self.spec, self.setup, self.settings = spec, list[str](), list[str]()
        for part in spec.split("+"):
            self._add(part)

    def _add(self, part: str) -> None:
        name, _, value = part.partition("=")
        if part in ("base", ""):
            return
        if part == "no-fk":
            self.setup += [f"ALTER TABLE {t} DROP CONSTRAINT {c}" for t, c in FOREIGN_KEYS]
        elif part == "written-words":  # revision 0014: the writer's words, not the server's
            self.setup.append("ALTER TABLE items ALTER COLUMN search_words DROP EXPRESSION")
        elif part == "words-trigger":  # words the writer left out made by the server
            self.setup += [
                "CREATE FUNCTION items_words() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN NEW.search_words := strip(to_tsvector('simple', "
                "coalesce(NEW.text, '') || ' ' || coalesce(NEW.tool_name, ''))); "
                "RETURN NEW; END $$",
                "CREATE TRIGGER items_words BEFORE INSERT ON items FOR EACH ROW "
                "WHEN (NEW.search_words IS NULL) EXECUTE FUNCTION items_words()",
            ]
        elif part == "no-words":
            self.setup.append("ALTER TABLE items DROP COLUMN search_words")
        elif part.startswith("no-"):
            self.setup.append(f"DROP INDEX {part[3:]}")
        elif name == "gin-fastupdate":
            self.setup.append(f"ALTER INDEX ix_items_search_words SET (fastupdate = {value})")
        elif name == "gin-pending":
            limit = int(value)
            self.setup.append(
                f"ALTER INDEX ix_items_search_words SET (gin_pending_list_limit = {limit})"
            )
        elif part.startswith("set:"):
            self.settings.append(f"SET {name[4:]} = {value}")
        elif part.startswith("sql:"):
            self.setup.append(part[4:])
        else:
            raise SystemExit(f"unknown variant part: {part}")


def _admin(url: sa.URL) -> sa.Engine:
    return sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")


def _backends(engine: sa.Engine) -> dict[int, float]:
    """CPU seconds of each server backend on the engine's database (a local server)."""
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    with engine.connect() as conn:
        pids = list(conn.exec_driver_sql(query).scalars())
    return {pid: cpu_seconds(pid) for pid in pids}


def _size(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar())


def run(store: sa.URL, variant: Variant, warm: list[Any], batches: list[Any]) -> str:
    copy_name = f"{store.database}_ab{os.getpid()}"
    admin = _admin(store)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {copy_name}")
        conn.exec_driver_sql(
            f"CREATE DATABASE {copy_name} TEMPLATE {store.database} STRATEGY FILE_COPY"
        )
    url = store.set(database=copy_name).render_as_string(hide_password=False)
    engine = make_engine(url)
    with engine.begin() as conn:
        for statement in variant.setup:
            conn.exec_driver_sql(statement)
    if variant.settings:
        sa.event.listen(engine, "connect", _settings(variant.settings))
    writer = StoreWriter(engine)
    for batch in warm:
        writer.write_batch(batch)
    server_before, size_before = _backends(engine), _size(engine)
    wall = cpu = 0.0
    for batch in batches:
        began, cpu_began = time.perf_counter(), time.process_time()
        writer.write_batch(batch)
        wall += time.perf_counter() - began
        cpu += time.process_time() - cpu_began
    server_after, grown = _backends(engine), _size(engine) - size_before
    server = sum(cpu - server_before.get(pid, 0.0) for pid, cpu in server_after.items())
    engine.dispose()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE {copy_name}")
    admin.dispose()
    steps = sum(len(b) for b in batches)
    return (
        f"{steps / wall:6.0f} steps/s wall, {steps / (cpu + server):6.0f} per CPU-second "
        f"(server {100 * server / (cpu + server):3.0f} %, {server / steps * 1e6:4.0f} µs a "
        f"step); the copy grew {grown / steps / 1000:5.2f} KB a step"
    )


def _settings(statements: list[str]) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
        dbapi_connection.commit()

    return on_connect


def main(args: argparse.Namespace) -> None:
    store = sa.engine.make_url(make_engine(args.store).url)
    start = datetime.now(UTC) - timedelta(hours=1)  # after the fill's last step
    workload = Workload(args.steps + WARM_UP * BATCH, start=start, days=0.04, seed=args.seed)
    batches = list(workload.batches(BATCH))
    warm, timed = batches[:WARM_UP], batches[WARM_UP:]
    variants = [Variant(spec) for spec in args.variants.split(",")]
    print(f"{store.database}: {args.steps:,} steps a variant, load {os.getloadavg()[0]:.1f}")
    for _ in range(args.rounds):
        for variant in variants:
            figures = run(store, variant, warm, timed)
            print(f"  {variant.spec:>32}: {figures}; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("store", help="a filled PostgreSQL store (left unchanged)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--variants", default="base,no-fk,no-words")
    main(parser.parse_args())
