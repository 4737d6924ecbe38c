"""OAuth-protected MCP servers through `/mcp/{name}`: to its clients the gateway is the
protected resource (RFC 9728). A 401's `resource_metadata` points at the gateway, which serves
the server's metadata with `resource` naming the gateway's URL for the server."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from gateway import jsoncodec
from gateway.config import McpServer
from gateway.errors import GatewayError
from gateway.proxy.upstream import Upstream

log = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/oauth-protected-resource"
RESOURCE_METADATA = re.compile(r'resource_metadata=(?:"[^"]*"|[^\s,]+)')
MAX_METADATA_BYTES = 256 * 1024


class ResourceMetadata:
    """Where each server said its metadata is (its last 401), and the gateway's own URLs."""

    def __init__(self, public_url: str | None) -> None:
        self._public_url = public_url
        self._upstream: dict[str, str] = {}  # server name -> its metadata URL, as it said

    def base(self, request: web.Request) -> str:
        """The gateway's URL as its clients reach it: `public_url`, else the request's."""
        return self._public_url or f"{request.scheme}://{request.host}"

    def www_authenticate(self, request: web.Request, server: str, value: str) -> str:
        """A server's challenge with its metadata URL replaced by the gateway's."""
        found = RESOURCE_METADATA.search(value)
        if found is None:
            return value
        said = found.group(0).partition("=")[2].strip('"')
        if urlsplit(said).scheme in ("http", "https"):
            self._upstream[server] = said
        ours = f'resource_metadata="{self.base(request)}{WELL_KNOWN}/mcp/{server}"'
        return value[: found.start()] + ours + value[found.end() :]

    def candidates(self, server: McpServer) -> list[str]:
        """The server's metadata URLs to try: the one it named, then the well-known ones
        (path-suffixed, then at the root), as a client of the server itself would."""
        parts = urlsplit(server.url)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        urls = [self._upstream.get(server.name), f"{origin}{WELL_KNOWN}{path}" if path else None]
        urls.append(f"{origin}{WELL_KNOWN}")
        return list(dict.fromkeys(url for url in urls if url is not None))


async def serve(
    request: web.Request,
    upstream: Upstream,
    servers: dict[str, McpServer],
    metadata: ResourceMetadata,
) -> web.Response:
    """`GET /.well-known/oauth-protected-resource/mcp/{name}`: the server's metadata, its
    `resource` the gateway's URL for the server; everything else (its authorization servers
    first) as the server gives it."""
    name = request.match_info["name"]
    server = servers.get(name)
    if server is None:
        return _not_found(f"No MCP server named {name!r} is configured.")
    for url in metadata.candidates(server):
        found = await _fetch(upstream, url, request.headers.get("MCP-Protocol-Version"))
        if found is not None:
            found["resource"] = f"{metadata.base(request)}/mcp/{name}"
            return web.Response(
                body=jsoncodec.dumps(found),
                content_type="application/json",
                headers={"Cache-Control": "no-store"},
            )
    return _not_found(f"MCP server {name!r} publishes no protected-resource metadata.")


async def _fetch(upstream: Upstream, url: str, version: str | None) -> dict[str, object] | None:
    """The metadata document at `url`, or None (not there, unreachable, not a JSON object).
    No credential goes with it: the document is public by definition."""
    headers = {"Accept": "application/json"}
    if version:
        headers["MCP-Protocol-Version"] = version
    try:
        answer = await upstream.send("GET", url, headers, None)
    except GatewayError as exc:
        log.info("MCP server metadata could not be fetched: %s", exc.message)
        return None
    body = bytearray()
    try:
        if answer.status != 200:
            return None
        async for chunk in answer.content.iter_any():
            body += chunk
            if len(body) > MAX_METADATA_BYTES:
                return None
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("MCP server metadata could not be read: %r", exc)
        return None
    finally:
        answer.release()
    try:
        parsed = jsoncodec.loads(bytes(body))
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _not_found(message: str) -> web.Response:
    body = {"error": "not_found", "error_description": message}
    return web.Response(body=jsoncodec.dumps(body), status=404, content_type="application/json")
