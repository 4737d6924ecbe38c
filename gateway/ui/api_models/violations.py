"""Violations of both sides (the model's and the MCP side's) and refusals."""

from __future__ import annotations

from typing import Any, Literal

from gateway.ui.api_models.common import ApiModel, Cursor, Timestamp


class Violation(ApiModel):
    id: str
    kind: str
    trace_id: str | None
    step_id: str | None
    call_id: str | None
    detail: str
    enforced: bool
    created_at: Timestamp
    items: list[Any] | None = None


class McpViolation(ApiModel):
    id: str
    kind: str
    trace_id: str | None
    step_id: None
    call_id: str | None
    detail: str
    enforced: bool
    created_at: Timestamp
    source: Literal["mcp"]
    server: str
    tool: str | None
    execution_id: str | None


class Refusal(ApiModel):
    """An enforced violation without a step: a request refused before the provider."""

    id: str
    created_at: Timestamp
    kind: str
    call_id: str | None
    detail: str
    enforced: bool
    items: list[Any]


class ViolationList(ApiModel):
    violations: list[Violation | McpViolation]
    next_cursor: Cursor
