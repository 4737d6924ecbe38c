"""A cassette's lines (JSON Lines): a header, then one line a step (DESIGN.md, Replay)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from gateway.ui.api_models.common import ApiModel, Timestamp


class CassetteHeader(ApiModel):
    format: Literal["loopwatch-cassette/1"]
    trace_id: str
    created_at: Timestamp
    loopwatch_version: str


class CassetteRequest(ApiModel):
    headers: dict[str, str] = Field(description="Its non-credential protocol headers.")
    body: dict[str, Any] = Field(description="The whole body the provider received.")


class CassetteResponse(ApiModel):
    status: int | None
    headers: dict[str, str]
    body: Any = Field(default=None, description="A JSON answer's body.")
    events: list[dict[str, Any]] | None = Field(
        default=None, description="A stream's events in order: `{event?, data}`."
    )


class CassetteStep(ApiModel):
    seq: int
    protocol: str
    method: str
    path: str
    request: CassetteRequest | None = Field(description="Null for a passthrough call.")
    response: CassetteResponse | None


class CassetteLine(RootModel[CassetteHeader | CassetteStep]):
    """One line of a cassette: its header first, then its steps in order."""
