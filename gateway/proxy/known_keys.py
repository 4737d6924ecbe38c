"""Loading the continuation key filter at start-up: every key stored or spooled before this
run, in batches read from indexes alone, each batch in a worker thread, so the event loop
serves requests meanwhile. Until it is loaded, placement looks every key up in the store.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

from sqlalchemy.engine import Engine

from gateway.background import Background
from gateway.continuation.keyfilter import BuiltKeys, KeyFilter
from gateway.continuation.keys import call_filter_key
from gateway.recording.spooler import spooled_keys
from gateway.store.read import key_walks, queries

log = logging.getLogger(__name__)

KEYS_PER_STEP = 2  # its continuation key and about one emitted call; more adds a layer
_SPOOL_BATCH = 10_000


def key_batches(engine: Engine, root: Path, own: Path) -> Generator[list[str], None, None]:
    """The filter's keys, a bounded list at a time: store reads happen as it is iterated."""
    yield from key_walks.continuation_key_batches(engine)
    for ids in key_walks.emitted_call_id_batches(engine):
        yield [call_filter_key(call_id) for call_id in ids]
    spooled = spooled_keys(root, own)
    while batch := list(itertools.islice(spooled, _SPOOL_BATCH)):
        yield batch


def _add_next(built: BuiltKeys, batches: Iterator[list[str]]) -> bool:
    batch = next(batches, None)
    if batch is None:
        return False
    built.add_all(batch)
    return True


def start_loading(
    owner: Background, engine: Engine, root: Path, own: Path, known: KeyFilter
) -> None:
    """The start-up load as a task the owner stops by asking and waiting: cancelling it could
    not stop a worker thread, which would still hold a store connection when the engine goes."""
    stop = threading.Event()
    owner.task("continuation-keys", load_known_keys(engine, root, own, known, stop), stop=stop.set)


async def load_known_keys(
    engine: Engine, root: Path, own: Path, known: KeyFilter, stop: threading.Event
) -> None:
    """Fill `known` for a gateway that trusts it; one that cannot (other writers share the
    store) keeps answering "maybe" and loads nothing. `stop` ends it after the current batch."""
    if not known.can_trust:
        known.abandon()
        return
    try:
        steps = await asyncio.to_thread(queries.stored_step_count, engine)
        built = BuiltKeys(steps * KEYS_PER_STEP)
        batches = key_batches(engine, root, own)
        try:
            while not stop.is_set() and await asyncio.to_thread(_add_next, built, batches):
                pass
        finally:
            await asyncio.to_thread(batches.close)  # its open store read ends here
    except Exception:
        log.exception("loading continuation keys failed; every history is looked up")
        known.abandon()
        return
    if not stop.is_set():
        known.install(built)
    log.debug("continuation key filter: %.1f MiB for %d steps", built.size_bytes / 2**20, steps)
