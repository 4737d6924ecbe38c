"""Retention in a running gateway: with `retention_days` set, its background purge removes
older traces and leaves no orphan row."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from gateway.store.write.writer import StoreWriter
from tests import harness
from tests.fakes.chat import completion
from tests.harness import GatewayFactory
from tests.store.test_retention import _tool_sets, _trace, assert_no_orphans
from tests.traffic import HELLO, post

provider, make_gateway = harness.provider, harness.make_gateway


async def test_gateway_purges_what_is_older_than_retention_days(
    make_gateway: GatewayFactory, database_url: str
) -> None:
    first = await make_gateway(database_url=database_url)  # makes the schema
    engine = first.deps.engine
    writer = StoreWriter(engine)
    old = datetime.now(UTC) - timedelta(days=8)
    for n in range(3):
        _trace(writer, engine, f"old-{n}", old)
    gw = await make_gateway(database_url=database_url, retention_days=7)
    gw.provider.queue(completion("fresh"))
    assert await post(gw, HELLO, **{"X-Loopwatch-Trace-Id": "fresh"}) == 200
    # The pass ends with its sweep of unused tool sets, after the traces are gone.
    for _ in range(500):
        if [t["id"] for t in await gw.traces()] == ["fresh"] and not _tool_sets(engine):
            break
        await asyncio.sleep(0.02)
    assert [t["id"] for t in await gw.traces()] == ["fresh"]
    assert_no_orphans(engine)
