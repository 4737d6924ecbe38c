"""The read API's query parameters, described once for the OpenAPI document. The handlers
read them with messages of their own (gateway.ui.api); the bounds are shared from here, and
the reading of a whole number."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from gateway.errors import BadRequest
from gateway.items import ViolationKind
from gateway.mcp.checks import KINDS as MCP_KINDS
from gateway.runs.status import TraceStatus

MAX_LIMIT = 200
STEPS_LIMIT = 100  # steps in one answer of GET /api/traces/{id}, unless asked otherwise
MAX_STEPS_LIMIT = 500
MAX_SEQ = 2**31 - 1

# Both sides' violation kinds: the model's and the MCP proxy's.
KINDS = sorted({*ViolationKind, *MCP_KINDS})
Kind = Annotated[str, WithJsonSchema({"type": "string", "enum": KINDS})]


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Page(Query):
    limit: int = Field(50, ge=1, le=MAX_LIMIT, description="At most this many on a page.")
    cursor: str | None = Field(None, description="The `next_cursor` of the page before.")


class TraceListQuery(Page):
    status: TraceStatus | None = Field(None, description="Runs in this status now.")
    model: str | None = Field(None, description="Runs that called a model matching this.")
    violation: Kind | None = Field(None, description="Runs with a violation of this kind.")
    kind: Kind | None = Field(None, description="As `violation`, when it is not given.")
    has_violations: bool | None = Field(None, description="Runs with (or without) violations.")
    session: str | None = Field(None, description="Runs of this session id.")
    since: datetime | None = Field(None, description="Updated at or after (RFC 3339; UTC).")
    until: datetime | None = Field(None, description="Updated before (RFC 3339; UTC).")
    q: str | None = Field(None, description="Full-text search of the runs' text.")
    include_children: bool | None = Field(
        None, description="List sub-agent runs too; by default roots alone."
    )


class TraceQuery(Query):
    steps_after: int = Field(0, ge=0, le=MAX_SEQ, description="Steps numbered after this.")
    steps_limit: int = Field(
        STEPS_LIMIT, ge=1, le=MAX_STEPS_LIMIT, description="At most this many steps."
    )


class ViolationQuery(Page):
    violation: Kind | None = Field(None, description="Violations of this kind.")
    kind: Kind | None = Field(None, description="As `violation`, when it is not given.")
    trace_id: str | None = Field(None, description="Violations of this run alone (`tr_...`).")


class ExecutionQuery(Page):
    join: Literal["none", "ambiguous"] | None = Field(
        None, description="Executions that matched no run, or more than one; default both."
    )


def whole(raw: str, name: str, low: int, high: int) -> int:
    """A query value that must be a whole number from `low` to `high`, in ASCII digits
    (`str.isdigit` admits `²`, which `int` refuses)."""
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}", param=name)
    return int(raw)
