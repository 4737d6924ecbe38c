"""DNS rebinding protection: a request whose `Host` or `Origin` names a site that is not the
gateway is refused with 403, in the protocol of the surface it asked (JSON-RPC for MCP)."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web
from aiohttp.typedefs import Middleware

from gateway import jsoncodec
from gateway.config import Settings
from gateway.errors import GatewayError
from gateway.protocols.registry import adapter_for_path
from gateway.proxy.handler import error_response
from gateway.proxy.mcp.relay import REFUSED, rpc_error

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
# Orchestrators probe these by the address they see: answering them discloses nothing.
UNCHECKED_PATHS = frozenset({"/healthz", "/readyz"})
MAX_REMEMBERED = 1024  # Host and Origin values judged, forgotten all at once past this
K = TypeVar("K")


class HostNotAllowed(GatewayError):
    status = 403
    type = "permission_error"
    code = "host_not_allowed"


class HostCheck:
    """Which `Host` and `Origin` values are the gateway's own. Bound to loopback, the names
    are `localhost`, `127.0.0.1` and `[::1]` (any port) plus `allowed_hosts`; bound to
    another address, only `allowed_hosts` turns the check on (the gateway cannot know the
    names it is reached by). A Host that is an IP address is always fine: rebinding needs a
    DNS name."""

    def __init__(self, settings: Settings) -> None:
        own = {settings.host.lower()} if settings.is_loopback() else set()
        self.enabled = settings.is_loopback() or bool(settings.allowed_hosts)
        self._names = LOOPBACK_NAMES | own | set(settings.allowed_hosts)
        self._hosts: dict[str, bool] = {}  # a Host header -> whether it is ours
        self._origins: dict[tuple[str, str], bool] = {}  # (Origin, Host) -> whether allowed

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused, or None. A client that sends no
        Origin (not a browser) and the gateway's own Host is always served."""
        if host is not None and not self._remembered(self._hosts, host, self._host_ok):
            return f"Host {host!r} is not a name of this gateway."
        if origin is not None and not self._remembered(
            self._origins, (origin, host or ""), self._origin_ok
        ):
            return f"Origin {origin!r} is not allowed to call this gateway."
        return None

    @staticmethod
    def _remembered(cache: dict[K, bool], key: K, judge: Callable[[K], bool]) -> bool:
        known = cache.get(key)
        if known is None:
            if len(cache) >= MAX_REMEMBERED:
                cache.clear()
            known = cache[key] = judge(key)
        return known

    def _host_ok(self, host: str) -> bool:
        name = _name_of(host)
        return name in self._names or _is_ip(name)

    def _origin_ok(self, key: tuple[str, str]) -> bool:
        """Same-origin (the gateway's own pages), or a loopback or allowed site's page."""
        origin, host = key
        scheme, sep, site = origin.lower().partition("://")
        if not sep or scheme not in ("http", "https") or not site or "/" in site:
            return False  # `null` (a sandboxed or file page) included
        return site == host.lower() or _name_of(site) in self._names


def _name_of(host: str) -> str:
    """`example.com:8080` -> `example.com`; `[::1]:8080` -> `[::1]`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def middleware(check: HostCheck) -> Middleware | None:
    """The aiohttp middleware holding `check`; None when the check is off."""
    if not check.enabled:
        return None

    @web.middleware
    async def host_checked(request: web.Request, handler: Handler) -> web.StreamResponse:
        headers = request.headers
        reason = check.refusal(headers.get("Host"), headers.get("Origin"))
        if reason is None or request.path in UNCHECKED_PATHS:
            return await handler(request)
        return _refused(request.path, reason)

    return host_checked


def _refused(path: str, reason: str) -> web.StreamResponse:
    detail = f"{reason} Add the name to allowed_hosts (LOOPWATCH_ALLOWED_HOSTS) if it is."
    if path.startswith("/mcp/"):
        body = rpc_error(None, REFUSED, detail, {"rule": HostNotAllowed.code})
        return web.Response(body=jsoncodec.dumps(body), status=403, content_type="application/json")
    return error_response(adapter_for_path(path), HostNotAllowed(detail))
