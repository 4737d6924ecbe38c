"""The MCP side: executions of tools through the gateway's MCP proxy, and its servers."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.ui.api_models.common import ApiModel, Cursor, Timestamp


class Execution(ApiModel):
    id: str
    call_id: str | None
    trace_id: str | None
    join: str
    server: str
    tool: str
    arguments: Any
    result: Any
    is_error: bool | None
    error: Any
    outcome: str | None
    duration_ms: float | None
    protocol_version: str | None
    delivery: str | None
    started_at: Timestamp
    violation_kinds: list[str]
    escaped: bool = Field(description="It broke a rule and still reached the server.")


class ExecutionList(ApiModel):
    executions: list[Execution]
    next_cursor: Cursor


class Server(ApiModel):
    name: str
    url: str | None = Field(description="As configured, without user info or query.")
    tools: list[Any] | None = Field(description="As last listed; null: never listed.")
    tools_seen_at: Timestamp | None
    calls: int
    calls_by_outcome: dict[str, int]
    other_requests: int


class ServerList(ApiModel):
    servers: list[Server]
