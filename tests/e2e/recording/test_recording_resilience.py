"""A database that cannot take writes never holds up proxying, and loses no record."""

from __future__ import annotations

import asyncio
import sqlite3

import aiohttp
import pytest

from tests.factories import chat_request
from tests.fakes.chat import completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite


async def test_proxying_goes_on_while_the_database_is_locked(
    gateway: Gateway, database_url: str
) -> None:
    await gateway.get("/api/traces")  # the schema exists before another writer takes the lock
    gateway.provider.queue(*(completion(f"answer {i}") for i in range(20)))
    blocker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        async with aiohttp.ClientSession() as session:

            async def ask(i: int) -> int:
                body = chat_request(f"q{i}")
                async with session.post(gateway.openai_base + "/chat/completions", json=body) as r:
                    await r.read()
                    return r.status

            statuses = await asyncio.wait_for(asyncio.gather(*(ask(i) for i in range(20))), 30)
        assert statuses == [200] * 20  # all answered while nothing could be written
        assert gateway.deps.recorder.queue_depth > 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    await gateway.deps.recorder.flush(timeout=30)
    traces = await gateway.traces(limit="50")
    assert len(traces) == 20
    assert gateway.deps.recorder.dropped_total == 0
