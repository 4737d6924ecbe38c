"""GET /readyz: 200 only while the store answers and the recorder is within its bound; a 503
names what is failing. Failures are real: a cut or stalled connection, a locked SQLite file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from gateway.store.migrate import head
from tests import harness
from tests.conftest import Database
from tests.fakes.chat import completion
from tests.harness import Gateway, GatewayFactory
from tests.tcp_relay import TcpRelay
from tests.traffic import HELLO, post

provider, make_gateway = harness.provider, harness.make_gateway

pytestmark = pytest.mark.sqlite


async def readyz(gw: Gateway) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(gw.url + "/readyz") as r:
        return r.status, await r.json()


async def until_ready(gw: Gateway, want: int) -> dict[str, Any]:
    for _ in range(300):
        status, body = await readyz(gw)
        if status == want:
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"/readyz never answered {want}: {body}")


async def test_ready_without_a_token(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(admin_token="an-admin-token-of-some-length")
    status, body = await readyz(gw)
    assert status == 200 and body["status"] == "ready" and body["failing"] == []
    assert body["checks"]["store"] == {"ok": True, "schema_revision": head()}
    assert body["checks"]["recorder"] == {"ok": True, "queue_depth": 0, "queue_size": 10_000}


@pytest.fixture
def relay() -> Iterator[TcpRelay]:
    relay = TcpRelay("127.0.0.1", 5432)
    relay.start()
    yield relay
    relay.close()


@pytest.mark.postgres
async def test_unreachable_postgresql_is_not_ready(
    postgres_database: Database, relay: TcpRelay, make_gateway: GatewayFactory
) -> None:
    url = postgres_database.url.replace(":5432/", f":{relay.port}/")
    gw = await make_gateway(database_url=url)
    assert (await readyz(gw))[0] == 200
    relay.cut()
    status, body = await readyz(gw)
    assert status == 503 and body["status"] == "not_ready" and body["failing"] == ["store"]
    assert "OperationalError" in body["checks"]["store"]["error"]
    assert body["checks"]["recorder"]["ok"] is True
    relay.start()  # the database is back on the same address
    await until_ready(gw, 200)


@pytest.mark.postgres
async def test_a_stalled_database_answers_503_within_the_bound(
    postgres_database: Database, relay: TcpRelay, make_gateway: GatewayFactory
) -> None:
    url = postgres_database.url.replace(":5432/", f":{relay.port}/")
    gw = await make_gateway(database_url=url)
    assert (await readyz(gw))[0] == 200
    relay.stall()
    first, second = await asyncio.gather(readyz(gw), readyz(gw))  # they share one check
    for status, body in (first, second):
        assert status == 503 and body["failing"] == ["store"]
        assert body["checks"]["store"]["error"] == "no answer within 2s"
    relay.resume()
    await until_ready(gw, 200)


async def test_a_recorder_past_its_bound_is_not_ready(
    make_gateway: GatewayFactory, database_url: str
) -> None:
    gw = await make_gateway(recorder_queue_size=2, recorder_batch_size=1)
    gw.provider.queue(*[completion(f"answer {n}") for n in range(6)])
    path = database_url.removeprefix("sqlite:///")
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another writer holds the database: writes queue up
    try:
        for _ in range(6):
            assert await post(gw, HELLO) == 200
        status, body = await readyz(gw)
        assert status == 503 and body["failing"] == ["recorder"]
        assert body["checks"]["store"]["ok"] is True  # reads still answer
        assert body["checks"]["recorder"]["queue_depth"] >= 2
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    body = await until_ready(gw, 200)
    assert body["checks"]["recorder"]["queue_depth"] < 2  # ready: below its bound again
