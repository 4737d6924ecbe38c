"""Where a batch's write cost goes on a filled SQLite store: for each variant, a fresh copy
of the store with one index dropped or one setting changed takes the same batches through
the production writer; printed per variant: steps/s (wall, and per CPU-second of this
process, SQLite's work included) and the bytes the writer read and wrote a step
(`/proc/self/io`: WAL appends and checkpoints, pages read back from the file).

Fill the store first with `store_scale.py --no-reads --no-retention`. Variants (join with
`+`): `base` (as production, the batch writer's settings included), `stock` (SQLite's
default cache and checkpoint), `no-<index>` (that index dropped), `no-fts` (no full-text
upkeep), `automerge=N` / `crisismerge=N` (FTS5 merge settings), `cache=KiB`,
`checkpoint=pages`, `epoch=steps` (the key epochs' size, gateway.store.key_epochs). Rounds
repeat the list, so drift in the machine's load shows.

Usage: python bench/store_write_ab.py STORE.db [--steps 10000] [--rounds 2]
       [--variants base,stock,no-ix_items_call_id_kind]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store_workload import Workload

from gateway.store import engine as engine_module
from gateway.store import key_epochs
from gateway.store.engine import make_engine
from gateway.store.write import fulltext
from gateway.store.write import writer as writer_module
from gateway.store.write.writer import StoreWriter

BATCH = 200  # the recorder's batch size
# The production functions, before any variant swaps them out of the writer's reach.
INDEX_STEPS, TUNE_FOR_BATCHES = fulltext.index_steps, engine_module.tune_for_batches
EPOCH_STEPS = key_epochs.EPOCH_STEPS
RANDOM_KEYED = (
    "ix_steps_continuation_key",
    "ix_steps_response_id",
    "ix_steps_provider_request_id",
    "ix_items_call_id_kind",
    "ix_items_args_key",
)


def io_bytes() -> tuple[int, int]:
    """This process's bytes read and written through system calls (page cache included)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


class Variant:
    """One variant's changes: SQL on the copy before writing, pragmas on the writer's
    connection, and whether the writer keeps its own settings and the full-text upkeep."""

    def __init__(self, spec: str) -> None:
        self.spec, self.setup, self.pragmas = spec, list[str](), list[str]()
        self.tuned, self.fts, self.epoch_steps = True, True, EPOCH_STEPS
        for part in spec.split("+"):
            self._add(part)

    def _add(self, part: str) -> None:
        fts_setting = "INSERT INTO items_fts(items_fts, rank) VALUES ('{}', {})"
        name, _, value = part.partition("=")
        if part in ("base", ""):
            return
        if part == "stock":
            self.tuned = False
        elif part == "no-fts":
            self.fts = False
        elif part == "no-random-keyed":
            self.setup += [f"DROP INDEX {index}" for index in RANDOM_KEYED]
        elif part.startswith("no-"):
            self.setup.append(f"DROP INDEX {part[3:]}")
        elif name in ("automerge", "crisismerge"):
            self.setup.append(fts_setting.format(name, int(value)))
        elif name == "cache":
            self.pragmas.append(f"PRAGMA cache_size=-{int(value)}")
        elif name == "checkpoint":
            self.pragmas.append(f"PRAGMA wal_autocheckpoint={int(value)}")
        elif name == "epoch":
            self.epoch_steps = int(value)
        else:
            raise SystemExit(f"unknown variant part: {part}")


def run(store: Path, variant: Variant, batches: list[list[Any]]) -> str:
    work = store.with_name(f"{store.stem}-ab-{os.getpid()}.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(store, work)
    raw = sqlite3.connect(work)
    for statement in variant.setup:
        raw.execute(statement)
    raw.commit()
    raw.close()
    engine = make_engine(f"sqlite:///{work}")
    if variant.pragmas:
        sa.event.listen(engine, "connect", _pragmas(variant.pragmas))
    writer_module.tune_for_batches = TUNE_FOR_BATCHES if variant.tuned else _no_op
    fulltext.index_steps = INDEX_STEPS if variant.fts else _no_op
    key_epochs.EPOCH_STEPS = variant.epoch_steps
    writer = StoreWriter(engine)
    wall = cpu = 0.0
    read, written = io_bytes()
    for batch in batches:
        began, cpu_began = time.perf_counter(), time.process_time()
        writer.write_batch(batch)
        wall += time.perf_counter() - began
        cpu += time.process_time() - cpu_began
    read_after, written_after = io_bytes()
    engine.dispose()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    steps = sum(len(b) for b in batches)
    return (
        f"{steps / wall:6.0f} steps/s wall, {steps / cpu:6.0f} per CPU-second; "
        f"read {(read_after - read) / steps / 1024:5.1f} KB, "
        f"written {(written_after - written) / steps / 1024:5.1f} KB a step"
    )


def _pragmas(statements: list[str]) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        for statement in statements:
            dbapi_connection.execute(statement)

    return on_connect


def _no_op(*_args: Any) -> None:
    return None


def main(args: argparse.Namespace) -> None:
    store = Path(args.store)
    start = datetime.now(UTC) - timedelta(hours=1)  # after the fill's last step
    workload = Workload(args.steps, start=start, days=0.04, seed=int(time.time()))
    batches = list(workload.batches(BATCH))
    variants = [Variant(spec) for spec in args.variants.split(",")]
    print(f"{store.name}: {args.steps:,} steps a variant, load {os.getloadavg()[0]:.1f}")
    for _ in range(args.rounds):
        for variant in variants:
            figures = run(store, variant, batches)
            print(f"  {variant.spec:>32}: {figures}; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("store", help="a filled SQLite store (left unchanged)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default="base,stock,no-random-keyed,no-fts")
    main(parser.parse_args())
