"""DNS rebinding: a page on another site that rebinds its name to the gateway's address is
refused on every surface (403, in the surface's protocol); the gateway's own names are not."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest

from gateway.config import Settings
from gateway.config_load import load_settings
from gateway.errors import ConfigError
from gateway.proxy.host_check import HostCheck
from tests.factories import chat_request, messages_request, user_message
from tests.fakes.chat import completion
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

EVIL = {"Host": "evil.example.com", "Origin": "http://evil.example.com"}


async def _send(gw: Gateway, method: str, path: str, headers: dict[str, str]) -> Any:
    body = None
    if path == "/v1/chat/completions":
        body = chat_request(user_message("hi"))
    elif path == "/v1/messages":
        body = messages_request("hi", model="claude-x", max_tokens=5)
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, gw.url + path, json=body, headers=headers) as answer,
    ):
        return answer.status, await answer.read()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/messages"),
        ("GET", "/v1/models"),
        ("GET", "/api/traces"),
        ("GET", "/traces"),
        ("GET", "/metrics"),
    ],
)
async def test_a_rebound_name_is_refused(gateway: Gateway, method: str, path: str) -> None:
    status, body = await _send(gateway, method, path, EVIL)
    assert status == 403
    error = json.loads(body)["error"]
    assert error["type"] == "permission_error"
    assert "evil.example.com" in error["message"] and "allowed_hosts" in error["message"]
    assert gateway.provider.received == []  # nothing went upstream


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example.com"},  # a GET sends no Origin, even from a page
        {"Origin": "http://evil.example.com"},  # a page calling the gateway by its address
        {"Origin": "null"},  # a sandboxed frame or a file
    ],
    ids=["host", "origin", "null-origin"],
)
async def test_either_header_alone_is_refused(gateway: Gateway, headers: dict[str, str]) -> None:
    status, _ = await _send(gateway, "GET", "/api/traces", headers)
    assert status == 403


async def test_the_anthropic_surface_refuses_in_its_own_shape(gateway: Gateway) -> None:
    status, body = await _send(gateway, "POST", "/v1/messages", EVIL)
    assert status == 403
    assert json.loads(body)["type"] == "error"  # Anthropic's error envelope


@pytest.mark.parametrize(
    "headers",
    [
        {},  # the client's own Host: the gateway's address, as every SDK sends it
        {"Host": "localhost:1234"},
        {"Host": "[::1]:8787", "Origin": "http://[::1]:8787"},
        {"Host": "localhost", "Origin": "http://localhost:3000"},  # a local page
        {"Host": "192.0.2.7:8787"},  # an address is never a rebound name
    ],
)
async def test_the_gateways_own_names_are_served(gateway: Gateway, headers: dict[str, str]) -> None:
    status, _ = await _send(gateway, "GET", "/api/traces", headers)
    assert status == 200


async def test_a_same_origin_page_is_served(gateway: Gateway) -> None:
    own = gateway.url.removeprefix("http://")
    status, _ = await _send(gateway, "GET", "/api/traces", {"Origin": f"http://{own}"})
    assert status == 200


async def test_health_probes_answer_any_host(gateway: Gateway) -> None:
    for path in ("/healthz", "/readyz"):
        status, _ = await _send(gateway, "GET", path, EVIL)
        assert status == 200


async def test_sdk_clients_are_served(gateway: Gateway) -> None:
    gateway.provider.queue(completion("hello"))
    sdk = gateway.closing(
        openai.AsyncOpenAI(base_url=gateway.openai_base, api_key="sk-test-1234", max_retries=0)
    )
    answer = await sdk.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "hello"


async def test_allowed_hosts_name_the_gateway_behind_a_name(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway(allowed_hosts=("lw.example.com",))
    named = {"Host": "lw.example.com", "Origin": "https://lw.example.com"}
    assert (await _send(gw, "GET", "/api/traces", named))[0] == 200
    assert (await _send(gw, "GET", "/api/traces", {"Host": "localhost:9"}))[0] == 200
    assert (await _send(gw, "GET", "/api/traces", EVIL))[0] == 403


async def test_bound_beyond_loopback_without_allowed_hosts_nothing_is_checked(
    make_gateway: Any,
) -> None:
    gw: Gateway = await make_gateway(host="0.0.0.0", admin_token=None)
    assert (await _send(gw, "GET", "/api/traces", EVIL))[0] == 200


def test_which_values_are_the_gateways() -> None:
    check = HostCheck(Settings(allowed_hosts=("lw.example.com",)))
    assert check.refusal(None, None) is None  # HTTP/1.0: no Host at all
    assert check.refusal("LW.Example.com:443", "https://lw.example.com") is None
    assert check.refusal("127.0.0.1:8787", "http://localhost:5173") is None
    assert check.refusal("[2001:db8::1]:8787", None) is None
    assert check.refusal("sub.lw.example.com", None) is not None
    assert check.refusal("127.0.0.1:8787", "http://127.0.0.2:8787") is not None
    assert check.refusal("127.0.0.1:8787", "chrome-extension://abc") is not None
    assert not HostCheck(Settings(host="0.0.0.0")).enabled
    assert HostCheck(Settings(host="0.0.0.0", allowed_hosts=("lw.example.com",))).enabled


def test_allowed_hosts_from_the_environment() -> None:
    environ = {"LOOPWATCH_ALLOWED_HOSTS": "lw.example.com, Other.Example ,::1"}
    settings = load_settings(environ=environ)
    assert settings.allowed_hosts == ("lw.example.com", "other.example", "[::1]")
    for bad in ("https://lw.example.com", "lw.example.com:8443", "a b"):
        with pytest.raises(ConfigError, match="allowed_hosts"):
            load_settings(environ={"LOOPWATCH_ALLOWED_HOSTS": bad})
