"""The admin token guards the UI and read API: bearer header, login form and its cookie."""

from __future__ import annotations

import time
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from gateway.ui import auth
from tests.harness import Gateway, GatewayFactory, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

TOKEN = "ui-admin-token-0123456789"
HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture
async def guarded(make_gateway: GatewayFactory) -> Gateway:
    return await make_gateway(admin_token=TOKEN)


async def get(gw: Gateway, path: str, **headers: str) -> tuple[int, str, aiohttp.ClientResponse]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(gw.url + path, headers=headers, allow_redirects=False) as r,
    ):
        return r.status, await r.text(), r


async def login(gw: Gateway, token: str, next_path: str = "/") -> aiohttp.ClientResponse:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            gw.url + "/login", data={"token": token, "next": next_path}, allow_redirects=False
        ) as r,
    ):
        await r.read()
        return r


async def test_without_a_token_pages_and_api_are_refused(guarded: Gateway) -> None:
    paths = ("/", "/violations", "/sessions", "/traces/x", "/api/traces")
    for path in (*paths, "/traces/x/steps/y?part=body", "/traces/x/live?after=0"):
        status, body, _ = await get(guarded, path)
        assert status == 401 and "invalid_admin_token" in body, path
    status, _, response = await get(guarded, "/violations?kind=x", **HTML)
    assert status == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login" and parse_qs(location.query) == {
        "next": ["/violations?kind=x"]
    }
    status, body, response = await get(guarded, "/login?next=%2Fviolations", **HTML)
    assert status == 200 and 'name="token"' in body and 'value="/violations"' in body
    assert "Content-Security-Policy" in response.headers
    assert (await get(guarded, "/static/app.css"))[0] == 200
    assert (await get(guarded, "/healthz"))[0] == 200


async def test_bearer_token_opens_pages_and_api(guarded: Gateway) -> None:
    for path in ("/", "/violations", "/sessions", "/api/traces"):
        assert (await get(guarded, path, Authorization=f"Bearer {TOKEN}"))[0] == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert (await get(guarded, "/traces/x/steps/y", **bearer))[0] == 404  # past the guard
    assert (await get(guarded, "/", Authorization="Bearer wrong-token-0123456789"))[0] == 401


async def test_login_sets_an_httponly_strict_cookie_that_is_not_the_token(
    guarded: Gateway,
) -> None:
    response = await login(guarded, TOKEN, "/violations")
    assert response.status == 302 and response.headers["Location"] == "/violations"
    raw = response.headers["Set-Cookie"]
    assert "HttpOnly" in raw and "SameSite=Strict" in raw and "Path=/" in raw
    morsel = SimpleCookie(raw)[auth.COOKIE]
    assert TOKEN not in morsel.value
    cookie = f"{auth.COOKIE}={morsel.value}"
    for path in ("/", "/api/traces"):
        assert (await get(guarded, path, Cookie=cookie))[0] == 200


async def test_wrong_token_is_refused_without_a_cookie(guarded: Gateway) -> None:
    response = await login(guarded, "not-the-admin-token-000")
    assert response.status == 401 and "Set-Cookie" not in response.headers
    assert (await login(guarded, "")).status == 401


async def test_forged_or_expired_cookies_are_refused(guarded: Gateway) -> None:
    expired = auth.session_value(TOKEN, now=time.time() - auth.SESSION_SECONDS - 10)
    other = auth.session_value("some-other-token-012345")
    for value in (expired, other, TOKEN, "garbage", f"{int(time.time()) + 999}.abc"):
        status, _, _ = await get(guarded, "/", Cookie=f"{auth.COOKIE}={value}")
        assert status == 401, value


async def test_login_only_returns_to_local_paths(guarded: Gateway) -> None:
    for target in (
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
    ):
        response = await login(guarded, TOKEN, target)
        assert response.headers["Location"] == "/", target


async def test_logout_clears_the_cookie(guarded: Gateway) -> None:
    cookie = f"{auth.COOKIE}={auth.session_value(TOKEN)}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            guarded.url + "/logout", headers={"Cookie": cookie}, allow_redirects=False
        ) as r,
    ):
        assert r.status == 302 and r.headers["Location"] == "/login"
        assert (
            f"{auth.COOKIE}=" in r.headers["Set-Cookie"] and "Max-Age=0" in r.headers["Set-Cookie"]
        )


async def test_without_a_configured_token_the_ui_is_open(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway()
    assert (await get(gw, "/"))[0] == 200
    status, _, response = await get(gw, "/login")
    assert status == 302 and response.headers["Location"] == "/"
