"""One error tree: each error knows its HTTP status, type and code.

Adapters render these in the client's protocol (`ProtocolAdapter.error_body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class GatewayError(Exception):
    status = 500
    type = "server_error"
    code = "gateway_error"
    # More fields of the error object, rendered by the adapters beside its message.
    details: Mapping[str, Any] = MappingProxyType({})

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}
        if code is not None:
            self.code = code


class BadRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class RequestTooLarge(GatewayError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class UnsupportedEncoding(GatewayError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_content_encoding"


class PairingViolation(BadRequest):
    """The request's tool history breaks a pairing rule; `code` names the rule."""

    def __init__(self, message: str, *, rule: str, call_id: str | None, param: str) -> None:
        super().__init__(message, param=param, code=rule)
        self.rule = rule
        self.call_id = call_id


class ReasoningNotReturned(BadRequest):
    """A tool-loop request drops reasoning its provider requires back, which would refuse it."""

    code = "reasoning_not_returned"


class ReplayDiverged(GatewayError):
    """A replayed agent's request differs from the recorded step: not retried, `diff`
    holds the detail."""

    status = 409
    type = "invalid_request_error"
    code = "replay_diverged"

    def __init__(self, message: str, *, diff: dict[str, Any]) -> None:
        super().__init__(message, headers={"x-should-retry": "false"})
        self.details = {"diff": diff}


class ForkImpossible(GatewayError):
    """A fork whose request cannot be sent: not rebuilt from the trace, or needing what the
    gateway did not keep (opaque reasoning)."""

    status = 409
    type = "invalid_request_error"
    code = "fork_impossible"


class BudgetExceeded(GatewayError):
    status = 429
    type = "budget_exceeded"

    def __init__(self, message: str, *, code: str, headers: dict[str, str] | None = None) -> None:
        merged = {"x-should-retry": "false", **(headers or {})}
        super().__init__(message, headers=merged, code=code)


class RepeatedToolCall(GatewayError):
    """The trace called one tool with the same arguments `loop_threshold` times: refused
    like a spent budget, so SDKs raise at once instead of retrying."""

    status = 429
    type = "loop_detected"
    code = "repeated_tool_call"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, headers={"x-should-retry": "false", **(headers or {})})


class Unauthorized(GatewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_admin_token"


class NotFound(GatewayError):
    status = 404
    type = "not_found_error"
    code = "not_found"


class UpstreamError(GatewayError):
    """The provider could not be reached or broke the connection."""

    status = 502
    type = "upstream_error"
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpgradeRefused(UpstreamError):
    """The provider refused to open a WebSocket: 426 Upgrade Required tells the client to
    send its requests over HTTP instead."""

    status = 426
    code = "websocket_upgrade_refused"


class SearchTimedOut(GatewayError):
    """A search ran past its time limit and was stopped (the database is busy or the
    search too broad); retrying later or narrowing it may succeed."""

    status = 503
    type = "timeout_error"
    code = "search_timeout"


class ConfigError(Exception):
    """A setting is invalid; the message names it. Stops start-up."""


class StartupError(Exception):
    """The gateway cannot start (database, port); the message is one line naming the cause."""


class HeaderTooLarge(GatewayError):
    status = 431
    type = "invalid_request_error"
    code = "request_header_too_large"


class MalformedRequest(BadRequest):
    code = "malformed_request"
