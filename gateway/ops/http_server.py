"""aiohttp's HTTP server with one change: a request its parser refuses (a header past the size
limit, a malformed line) gets a JSON error in OpenAI's format and one log line, no traceback.

aiohttp answers those itself with a plain-text 400 and logs them with a traceback whose message
quotes the first 100 bytes of the offending line, which may be an Authorization header.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from gateway.errors import GatewayError, HeaderTooLarge, MalformedRequest
from gateway.protocols.base import openai_error_body

log = logging.getLogger("loopwatch.http")


def refusal(exc: HttpProcessingError) -> tuple[GatewayError, str]:
    """Our error for what the parser refused, and words for the log that quote no request data."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the"
        what = f"a header or request line over {limit} bytes"
        return HeaderTooLarge(f"Request refused: {what}."), what
    if exc.message == "Too many headers received":
        return HeaderTooLarge("Request refused: too many headers."), "too many headers"
    what = f"a malformed request ({type(exc).__name__})"
    return MalformedRequest(f"Request refused: {what}."), what


class _RequestHandler(RequestHandler):
    _refused: StreamResponse | None = None

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> StreamResponse:
        if not isinstance(exc, HttpProcessingError) or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        error, what = refusal(exc)
        log.warning("refused %s from %s: %d", what, request.remote, error.status)
        response = web.json_response(openai_error_body(error), status=error.status)
        response.force_close()
        self._refused = response
        return response

    def log_access(
        self, request: BaseRequest, response: StreamResponse, time: float | None
    ) -> None:
        if response is not self._refused:  # the warning above is that request's one line
            super().log_access(request, response, time)


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return _RequestHandler(self, loop=self._loop, **self._kwargs)


class GatewayRunner(web.AppRunner):
    """An AppRunner whose connections are handled by `_RequestHandler`, and whose request
    bodies arrive as the client sent them: the gateway decodes them itself, bounded, and
    refuses codings it cannot read (`gateway.stream.codings`)."""

    __slots__ = ()

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, **{"auto_decompress": False, **kwargs})

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # aiohttp has no parameter for the handler class; the server is ours to specialise.
        server.__class__ = _Server
        return server
