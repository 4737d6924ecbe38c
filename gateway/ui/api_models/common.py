"""What the read API's models share: a strict base, times, usage, budgets, tree totals,
pages, and the error shape every `/api` route answers with."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# Stored times as the store writes them: RFC 3339 in UTC with microseconds and a `Z`. Kept
# as text, so the answer stays byte for byte what the store reads.
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Cursor = Annotated[
    str | None, Field(description="Pass as `cursor` for the next page; null on the last.")
]


class ApiModel(BaseModel):
    """A key the model does not name is an error: the document cannot drift from the JSON."""

    model_config = ConfigDict(extra="forbid")


class Usage(ApiModel):
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None


class Budget(ApiModel):
    max_steps: int | None
    max_tokens: int | None


class TreeTotals(ApiModel):
    """A whole tree of runs (a root and its sub-agents) summed."""

    traces: int
    steps: int
    input_tokens: int
    output_tokens: int
    cost: float | None = Field(description="Dollars; null when no step was priced.")
    duration: float | None = Field(description="Milliseconds from first request to last end.")


class ErrorDetail(BaseModel):
    """The OpenAI error object; some errors add fields of their own (e.g. `diff`)."""

    model_config = ConfigDict(extra="allow")

    message: str
    type: str
    code: str | None
    param: str | None


class ErrorBody(ApiModel):
    error: ErrorDetail
