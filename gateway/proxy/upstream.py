"""The single pooled aiohttp client session to providers; transport errors → our error tree."""

from __future__ import annotations

import io
from collections.abc import AsyncIterable, Mapping

import aiohttp
from aiohttp.payload import TOO_LARGE_BYTES_BODY
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from gateway.config import Settings
from gateway.errors import UpgradeRefused, UpstreamError, UpstreamTimeout
from gateway.protocols.base import KEY_HEADERS

# Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus the ones
# aiohttp recomputes for the body it sends.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


class Upstream:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self._settings.connect_timeout,
            sock_read=self._settings.read_timeout,
        )
        # auto_decompress off: the client gets the provider's bytes as sent. No cookie jar:
        # a cookie one client's provider set is never sent on another client's request (and
        # no request pays for looking cookies up).
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | AsyncIterable[bytes] | None,
    ) -> aiohttp.ClientResponse:
        """Send a request; the caller reads and releases the response."""
        assert self._session is not None, "Upstream.start() was not awaited"
        data: bytes | io.BytesIO | AsyncIterable[bytes] | None = body
        if isinstance(body, bytes) and len(body) > TOO_LARGE_BYTES_BODY:
            # Written in chunks with back-pressure, where one bytes write would hold the loop
            # (aiohttp warns); the length is still known and sent.
            data = io.BytesIO(body)
        try:
            return await self._session.request(
                method, url, headers=headers, data=data, allow_redirects=False
            )
        except TimeoutError as exc:
            # The origin only: a query may hold a key, and the message is stored and returned.
            where = URL(url).origin()
            raise UpstreamTimeout(f"The provider did not answer in time ({where}).") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"The provider could not be reached: {exc}") from exc

    async def open_socket(
        self, url: str, headers: Mapping[str, str], protocols: tuple[str, ...], max_msg_size: int
    ) -> aiohttp.ClientWebSocketResponse:
        """Open a WebSocket to the provider (compressed if it agrees); the caller closes it.
        Idle is normal on a socket (a tool may run for minutes): no read timeout once open."""
        assert self._session is not None, "Upstream.start() was not awaited"
        try:
            return await self._session.ws_connect(
                url,
                headers=headers,
                protocols=protocols,
                compress=15,
                max_msg_size=max_msg_size,
                autoclose=False,
            )
        except aiohttp.WSServerHandshakeError as exc:
            message = f"The provider refused a WebSocket (HTTP {exc.status}): send over HTTP."
            raise UpgradeRefused(message) from exc
        except TimeoutError as exc:
            where = URL(url).origin()
            raise UpstreamTimeout(f"The provider did not answer in time ({where}).") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"The provider could not be reached: {exc}") from exc


def forward_headers(
    incoming: Mapping[str, str], *, credential: tuple[str, str] | None
) -> dict[str, str]:
    """Client headers minus hop-by-hop and our own; the route's key replaces the client's:
    `credential` is the header it goes in and its value (`routing.Target.credential`)."""
    out: dict[str, str] = {}
    named = _named_by_connection(incoming)
    dropped = HOP_BY_HOP | named if named else HOP_BY_HOP
    for name, value in incoming.items():
        lower = name.lower()
        if lower in dropped or lower.startswith("x-loopwatch-"):
            continue
        out[name] = value
    if credential is not None:
        for name in [n for n in out if n.lower() in KEY_HEADERS]:
            del out[name]
        out[credential[0]] = credential[1]
    return out


def response_headers(incoming: Mapping[str, str], *, body_rewritten: bool) -> list[tuple[str, str]]:
    """Provider response headers for the client; Content-Length only when bytes are unchanged."""
    out = []
    per_connection = _named_by_connection(incoming)
    for name, value in incoming.items():
        lower = name.lower()
        if lower in per_connection:
            continue
        if lower in HOP_BY_HOP and not (lower == "content-length" and not body_rewritten):
            continue
        out.append((name, value))
    return out


_NONE: frozenset[str] = frozenset()


def _named_by_connection(headers: Mapping[str, str]) -> frozenset[str]:
    """Headers a `Connection` header lists are hop-by-hop too (RFC 9110 section 7.6.1)."""
    if isinstance(headers, CIMultiDictProxy | CIMultiDict):  # aiohttp's: one lookup
        values = headers.getall("Connection", ())
    else:
        values = [v for k, v in headers.items() if k.lower() == "connection"]
    if not values:
        return _NONE
    listed = ",".join(values)
    names = {token.strip().lower() for token in listed.split(",")}
    return frozenset(names - {"", "close", "keep-alive", "content-length"})
