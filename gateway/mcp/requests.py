"""What the observer keeps of an MCP request: where it came from (its context), what waits
for its answer, and the gateway's refusal when it answers in the server's stead."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.mcp.messages import McpRequest
from gateway.mcp.records import Execution


@dataclass(frozen=True, slots=True)
class Context:
    """What the HTTP request (or stdio bridge) says besides the message."""

    server: str
    trace_header: str | None = None
    traceparent: str | None = None
    protocol_version: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    rpc_id: Any
    rule: str
    message: str


@dataclass(slots=True)
class Tracked:
    """A request waiting for its answer."""

    request: McpRequest
    context: Context
    started_at: datetime
    started: float
    trace_id: str | None = None
    execution: Execution | None = None
    judged: bool = False  # its call's rules were checked (before it went to the server)
