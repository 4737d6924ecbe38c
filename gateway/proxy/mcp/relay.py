"""`/mcp/{name}`: POST, GET and DELETE forwarded to the server's Streamable HTTP endpoint,
byte for byte and unbuffered; each chunk goes to the client first, then to the reader."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import web

from gateway import ids, jsoncodec
from gateway.errors import GatewayError
from gateway.mcp.messages import ResponseReader, parse_error
from gateway.mcp.requests import Context, Refusal, Tracked
from gateway.proxy.mcp.runtime import McpRuntime
from gateway.proxy.relay import handler_cancelled
from gateway.proxy.upstream import Upstream, forward_headers, response_headers

log = logging.getLogger(__name__)

TRACE_HEADER = "X-Loopwatch-Trace-Id"
_CLIENT_GONE = (asyncio.CancelledError, ConnectionResetError, aiohttp.ClientConnectionResetError)
# JSON-RPC error codes: the method (here: the server) is unknown; the body is not JSON; the
# gateway refused.
METHOD_NOT_FOUND = -32601
PARSE_ERROR = -32700
REFUSED = -32001
UNREACHABLE = -32603


def rpc_error(rpc_id: object, code: int, message: str, data: object = None) -> dict[str, object]:
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rpc_id, "error": error}


def context_of(request: web.Request, server: str) -> Context:
    header = request.headers.get(TRACE_HEADER)
    return Context(
        server=server,
        trace_header=header if header and ids.TRACE_ID_RE.match(header) else None,
        traceparent=request.headers.get("traceparent"),
        protocol_version=request.headers.get("MCP-Protocol-Version"),
        session_id=request.headers.get("Mcp-Session-Id"),
    )


async def handle(
    request: web.Request, upstream: Upstream, runtime: McpRuntime
) -> web.StreamResponse:
    if request.method != "POST":  # a GET stream may last for hours: nothing waits on it
        return await _proxy(request, upstream, runtime)
    with runtime.observing():
        return await _proxy(request, upstream, runtime)


async def _proxy(
    request: web.Request, upstream: Upstream, runtime: McpRuntime
) -> web.StreamResponse:
    name = request.match_info["name"]
    server = runtime.servers.get(name)
    if server is None:
        body = rpc_error(None, METHOD_NOT_FOUND, f"No MCP server named {name!r} is configured.")
        return web.json_response(body, status=404)
    payload = await request.read() if request.method == "POST" else None
    if payload and (problem := parse_error(payload)) is not None:
        body = rpc_error(None, PARSE_ERROR, f"Parse error: {problem}")
        return web.json_response(body, status=400)
    headers = forward_headers(request.headers, credential=None)
    headers.update(server.headers)
    url = _target(server.url, request.rel_url.raw_query_string)
    sending: asyncio.Future[aiohttp.ClientResponse]
    if runtime.observer.enforcing:  # judged before anything goes upstream
        tracked, refusals = runtime.begin(context_of(request, name), payload)
        if refusals:
            runtime.unanswered(tracked, "refused with another request of its batch")
            return _refused(refusals)
        sending = runtime.background.task(
            "mcp-send", upstream.send(request.method, url, headers, payload), awaited=True
        )
    else:
        sending, tracked = await _send_then_observe(
            request, upstream, runtime, (url, headers, payload)
        )
    try:
        answer = await sending
    except GatewayError as exc:
        runtime.unanswered(tracked, exc.message)
        body = rpc_error(
            None, UNREACHABLE, f"MCP server {name!r} could not be reached: {exc.message}"
        )
        return web.json_response(body, status=502)
    return await _relay(request, answer, runtime, tracked)


async def _send_then_observe(
    request: web.Request,
    upstream: Upstream,
    runtime: McpRuntime,
    outgoing: tuple[str, dict[str, str], bytes | None],
) -> tuple[asyncio.Future[aiohttp.ClientResponse], dict[str, Tracked]]:
    """The request goes upstream first; it is read and joined while the server works."""
    url, headers, payload = outgoing
    sent = runtime.observer.sent()
    sending = runtime.background.task(
        "mcp-send", upstream.send(request.method, url, headers, payload), awaited=True
    )
    try:
        await asyncio.sleep(0)  # on a kept-alive connection the request is written now
    except asyncio.CancelledError:
        sending.cancel()
        raise
    tracked, _ = runtime.begin(context_of(request, request.match_info["name"]), payload, sent=sent)
    return sending, tracked


def _target(url: str, query: str) -> str:
    """The server's URL plus the client's query, as the client encoded it."""
    if not query:
        return url
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _refused(refusals: list[Refusal]) -> web.Response:
    answers = [rpc_error(r.rpc_id, REFUSED, r.message, {"rule": r.rule}) for r in refusals]
    body = answers[0] if len(answers) == 1 else answers
    return web.Response(body=jsoncodec.dumps(body), content_type="application/json")


async def _relay(
    request: web.Request,
    answer: aiohttp.ClientResponse,
    runtime: McpRuntime,
    tracked: dict[str, Tracked],
) -> web.StreamResponse:
    response = web.StreamResponse(status=answer.status, reason=answer.reason)
    for name, value in response_headers(answer.headers, body_rewritten=False):
        if name.lower() == "www-authenticate":  # its metadata is the gateway's to serve
            value = runtime.metadata.www_authenticate(request, request.match_info["name"], value)
        response.headers.add(name, value)
    resuming = request.method == "GET"  # a session's stream: may carry answers of a POST's
    if resuming:
        tracked = runtime.resumed(request.headers.get("Mcp-Session-Id"))
    encoded = answer.headers.get("Content-Encoding", "identity").lower() != "identity"
    reader = ResponseReader(answer.content_type) if tracked and not encoded else None
    session = answer.headers.get("Mcp-Session-Id")
    ending = f"the server answered HTTP {answer.status} without a JSON-RPC response"
    gone = False
    try:
        await response.prepare(request)
        async for chunk in answer.content.iter_any():
            if reader is not None and (found := reader.feed(chunk)):
                # Spooled before the client holds the answer: a gateway killed after writing
                # it would otherwise lose an answered call (an append, no wait on a disk).
                runtime.messages(tracked, found, session)
                await runtime.spooled()
            await response.write(chunk)
        if reader is not None:
            runtime.messages(tracked, reader.end(), session)
        await response.write_eof()
    except _CLIENT_GONE:
        answer.close()  # the client went away: so does the server's request
        gone, ending = True, "the client went away"
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("MCP server connection broke mid-response: %r", exc)
        ending = "the server connection broke"
    finally:
        answer.release()
    if not resuming:
        _settle(request, runtime, tracked, reader, ending)
    if gone and handler_cancelled():
        raise asyncio.CancelledError
    return response


def _settle(
    request: web.Request,
    runtime: McpRuntime,
    tracked: dict[str, Tracked],
    reader: ResponseReader | None,
    ending: str,
) -> None:
    """Requests a POST's stream left without an answer (the client left, the server broke
    off or closed it) end here; or, the stream being resumable, wait for the session's GET."""
    session = request.headers.get("Mcp-Session-Id")
    if tracked and session and reader is not None and reader.resumable:
        runtime.park(session, tracked, ending)
    else:
        runtime.unanswered(tracked, ending)
