"""Header handling between client, gateway and provider."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict

from gateway.config import Settings
from gateway.errors import UpgradeRefused, UpstreamError
from gateway.proxy.upstream import Upstream, forward_headers, response_headers


def test_hop_by_hop_and_connection_named_headers_are_not_forwarded() -> None:
    incoming = CIMultiDict(
        {
            "Host": "gateway",
            "Connection": "keep-alive, X-Trace-Hop",
            "X-Trace-Hop": "1",
            "Transfer-Encoding": "chunked",
            "X-Loopwatch-Trace-Id": "run-1",
            "Authorization": "Bearer sk-client",
            "OpenAI-Beta": "assistants=v2",
        }
    )
    out = forward_headers(incoming, credential=None)
    assert out == {"Authorization": "Bearer sk-client", "OpenAI-Beta": "assistants=v2"}


def test_route_key_replaces_every_client_key() -> None:
    incoming = CIMultiDict({"x-api-key": "sk-ant-client", "authorization": "Bearer sk-client"})
    out = forward_headers(incoming, credential=("x-api-key", "sk-ant-route"))
    assert out == {"x-api-key": "sk-ant-route"}


def test_content_length_kept_only_when_the_body_is_unchanged() -> None:
    incoming = CIMultiDict({"Content-Length": "12", "Connection": "close", "x-request-id": "r"})
    assert response_headers(incoming, body_rewritten=False) == [
        ("Content-Length", "12"),
        ("x-request-id", "r"),
    ]
    assert response_headers(incoming, body_rewritten=True) == [("x-request-id", "r")]


async def test_a_cookie_one_provider_response_sets_is_never_sent_upstream_again(
    aiohttp_server: Any,
) -> None:
    """The upstream session is shared by every client: a cookie kept from one client's
    response would travel with the next client's request."""
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        response = web.json_response({"ok": True})
        response.set_cookie("session", "from-the-first-client")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    server = await aiohttp_server(app)
    upstream = Upstream(Settings())
    await upstream.start()
    try:
        for _ in range(2):
            # A host name, as providers have (aiohttp keeps no cookie of an IP address).
            url = f"http://localhost:{server.port}/v1/chat/completions"
            response = await upstream.send("POST", url, {"Content-Type": "application/json"}, b"{}")
            assert "session=" in response.headers["Set-Cookie"]
            await response.read()
            response.release()
    finally:
        await upstream.close()
    assert seen == [None, None]


async def test_a_provider_without_a_socket_is_an_upgrade_refused(aiohttp_server: Any) -> None:
    """Any answer but 101 to the upgrade: the client is told to send over HTTP (426)."""

    async def no_socket(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "Not found"}}, status=404)

    app = web.Application()
    app.router.add_get("/v1/responses", no_socket)
    server = await aiohttp_server(app)
    upstream = Upstream(Settings())
    await upstream.start()
    try:
        with pytest.raises(UpgradeRefused) as refused:
            await upstream.open_socket(str(server.make_url("/v1/responses")), {}, (), 1024)
        with pytest.raises(UpstreamError) as unreachable:
            await upstream.open_socket(f"http://127.0.0.1:{_closed_port()}/v1", {}, (), 1024)
    finally:
        await upstream.close()
    assert (refused.value.status, refused.value.code) == (426, "websocket_upgrade_refused")
    assert "404" in refused.value.message
    assert unreachable.value.status == 502 and not isinstance(unreachable.value, UpgradeRefused)


def _closed_port() -> int:
    """A port nothing listens on (just released by the OS)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
