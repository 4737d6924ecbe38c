"""A trace's steps and their typed items, as `GET /api/traces/{trace_id}` gives them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.ui.api_models.common import ApiModel, Timestamp, Usage
from gateway.ui.api_models.mcp import Execution


class StepUsage(Usage):
    cache_creation_tokens: int | None


class Item(ApiModel):
    kind: str
    role: str | None
    text: str | None
    call_id: str | None
    tool_name: str | None
    arguments: str | None
    is_error: bool | None
    attrs: dict[str, Any]
    executions: list[Execution] | None = Field(
        default=None, description="On an output tool call: the MCP executions it caused."
    )


class Step(ApiModel):
    id: str
    seq: int
    protocol: str
    method: str
    path: str
    model: str | None
    stream: bool
    http_status: int | None
    stop_reason: str
    raw_stop_reason: str | None
    usage: StepUsage
    provider_request_id: str | None
    response_id: str | None
    started_at: Timestamp | None
    latency_ms: float | None
    ttft_ms: float | None
    tool_ms: float | None
    cost_usd: float | None
    cost_source: str | None
    retry_of: str | None
    input_items: list[Item]
    output_items: list[Item]
    error: dict[str, Any] | None
    params: dict[str, Any] | str | None = Field(
        description="The request's parameters, redacted; as JSON text when they nest deeper "
        "than the store writes JSON (the provider judged them; the step is kept)."
    )
    tool_set: str | None
    tools: list[Any] | str | None = Field(
        description="The declared tools; null: not recorded; JSON text when they nest deeper "
        "than the store writes JSON."
    )
    attrs: dict[str, Any]
