"""An OAuth-protected MCP server through `/mcp/{name}`: to the client the gateway is the
protected resource. The SDK's OAuth client discovers the server's authorization server through
the gateway, asks it for a token for the gateway's URL, and then calls the server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.e2e.mcp.mcp_harness import mcp_server_process
from tests.harness import GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

WELL_KNOWN = "/.well-known/oauth-protected-resource"


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    with mcp_server_process("tests.e2e.mcp.mcp_auth_server") as url:
        yield url


class Memory:
    """Token storage: what the client learned, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user's browser: opens the authorization URL and comes back with the code (the
    test authorization server approves at once, redirecting to the callback)."""

    def __init__(self) -> None:
        self.redirect: dict[str, list[str]] = {}

    async def open(self, url: str) -> None:
        async with httpx2.AsyncClient() as http:
            answer = await http.get(url, follow_redirects=False)
        assert answer.status_code == 302, answer.text
        self.redirect = parse_qs(urlsplit(answer.headers["Location"]).query)

    async def callback(self) -> AuthorizationCodeResult:
        def one(name: str) -> str | None:
            return self.redirect.get(name, [None])[0]

        return AuthorizationCodeResult(code=one("code") or "", state=one("state"), iss=one("iss"))


async def _gateway(make_gateway: GatewayFactory, url: str, **overrides: Any) -> Any:
    return await make_gateway(mcp_servers=({"name": "secure", "url": url},), **overrides)


async def test_the_sdk_oauth_client_gets_a_token_for_the_gateway(
    make_gateway: GatewayFactory, auth_url: str
) -> None:
    gateway = await _gateway(make_gateway, auth_url)
    resource = f"{gateway.url}/mcp/secure"
    browser = Browser()
    oauth = OAuthClientProvider(
        server_url=resource,
        client_metadata=OAuthClientMetadata(
            client_name="loopwatch-test",
            redirect_uris=["http://127.0.0.1:9/callback"],  # type: ignore[list-item]
            grant_types=["authorization_code"],
            response_types=["code"],
        ),
        storage=Memory(),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    async with httpx2.AsyncClient(auth=oauth, timeout=30) as http:
        transport = streamable_http_client(resource, http_client=http)
        async with Client(transport, cache=None) as client:
            result = await client.call_tool("resources_asked", {})
    asked = result.structured_content
    assert asked == {"result": [resource, resource]}  # authorization and token requests


async def test_the_challenge_and_the_metadata_name_the_gateway(
    make_gateway: GatewayFactory, auth_url: str
) -> None:
    gateway = await _gateway(make_gateway, auth_url)
    upstream = f"{urlsplit(auth_url).scheme}://{urlsplit(auth_url).netloc}"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{gateway.url}/mcp/secure", json=ping) as refused:
            assert refused.status == 401
            challenge = refused.headers["WWW-Authenticate"]
        ours = f"{gateway.url}{WELL_KNOWN}/mcp/secure"
        assert f'resource_metadata="{ours}"' in challenge
        assert challenge.startswith("Bearer ") and "invalid_token" in challenge
        async with session.get(ours) as answer:
            assert answer.status == 200
            metadata = await answer.json()
        async with session.get(f"{gateway.url}{WELL_KNOWN}/mcp/nope") as missing:
            assert missing.status == 404
    assert metadata["resource"] == f"{gateway.url}/mcp/secure"
    assert metadata["authorization_servers"] == [upstream]  # unchanged
    assert metadata["scopes_supported"] == ["tools"]


async def test_behind_a_public_url_the_metadata_names_it(
    make_gateway: GatewayFactory, auth_url: str
) -> None:
    """Before the server ever answered 401: found at its well-known path."""
    public = "https://lw.example.com"
    gateway = await _gateway(make_gateway, auth_url, public_url=public)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.url}{WELL_KNOWN}/mcp/secure") as answer,
    ):
        assert answer.status == 200
        assert (await answer.json())["resource"] == f"{public}/mcp/secure"
