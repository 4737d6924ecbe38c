"""Fixtures that run the real gateway in-process against the fake provider, over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.app import DEPS, create_app
from gateway.config import Settings
from gateway.proxy.deps import Deps
from tests.fakes.provider import FakeProvider


class _Client(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Client)


@dataclass
class Gateway:
    url: str  # base URL, no trailing slash
    app: web.Application
    provider: FakeProvider
    clients: list[_Client] = field(default_factory=list)

    def closing(self, client: ClientT) -> ClientT:
        """An SDK client closed when the test ends: its pooled connections stay open till then."""
        self.clients.append(client)
        return client

    @property
    def deps(self) -> Deps:
        return self.app[DEPS]

    @property
    def openai_base(self) -> str:
        return f"{self.url}/v1"

    async def flush(self) -> None:
        await self.deps.open_responses.settled()  # step ends taken from the store
        await self.deps.recorder.flush(timeout=10)

    async def get(self, path: str, **kwargs: Any) -> Any:
        await self.flush()
        async with aiohttp.ClientSession() as session, session.get(self.url + path, **kwargs) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    async def trace(self, trace_id: str) -> dict[str, Any]:
        """The trace with all its steps, following the API's pages of steps."""
        result: dict[str, Any] = await self.get(f"/api/traces/{trace_id}")
        while result["next_steps_after"] is not None:
            params = {"steps_after": str(result["next_steps_after"])}
            more = await self.get(f"/api/traces/{trace_id}", params=params)
            result["steps"] += more["steps"]
            result["next_steps_after"] = more["next_steps_after"]
        return result

    async def traces(self, **params: str) -> list[dict[str, Any]]:
        result = await self.get("/api/traces", params=params)
        return list(result["traces"])


@pytest.fixture
async def provider(aiohttp_server: Any) -> FakeProvider:
    fake = FakeProvider()
    server = await aiohttp_server(fake.app)
    fake.url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake


GatewayFactory = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def make_gateway(
    provider: FakeProvider, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayFactory]:
    servers: list[TestServer] = []
    gateways: list[Gateway] = []

    async def make(**overrides: Any) -> Gateway:
        values: dict[str, Any] = {
            "upstream_url": provider.url,  # type: ignore[attr-defined]
            "anthropic_upstream_url": provider.url.removesuffix("/v1"),  # type: ignore[attr-defined]
            "database_url": database_url,
            "recorder_flush_seconds": 0.01,
            # The recorder is the setting's default, a process, as in production; a test that
            # needs the in-process drain passes recorder="thread" and says why.
            "spool_dir": str(tmp_path_factory.mktemp("spool")),
            **overrides,
        }
        app = create_app(Settings(**values))
        server = TestServer(app, handler_cancellation=True)
        # As the gateway's own runners serve it: request bodies undecoded (gateway.stream.codings).
        await server.start_server(auto_decompress=False)
        servers.append(server)
        gateways.append(Gateway(str(server.make_url("")).rstrip("/"), app, provider))
        return gateways[-1]

    yield make
    for gateway in gateways:
        for client in gateway.clients:
            await client.close()
    for server in servers:
        await server.close()


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway()
