"""`POST /api/traces/{trace_id}/fork`: what it is asked and what it answers."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.ui.api_models.common import ApiModel


class ForkRequest(ApiModel):
    at_step: int = Field(description="The step whose request is sent again, changed.")
    model: str | None = Field(default=None, description="The model to ask instead.")
    params: dict[str, Any] | None = Field(
        default=None,
        description="Request fields set over the step's (a null removes one), e.g. "
        '`{"temperature": 0}` or `{"thinking": null}` to fork without reasoning.',
    )


class ForkAnswer(ApiModel):
    """200: the gateway refused the fork's request by its own rules (`error`; the new trace
    holds the refusal); 201: the fork's step is stored; 202: not yet stored, `url` shows it
    when it is."""

    trace_id: str = Field(description="The fork's own trace.")
    fork_of: str
    fork_at: int
    status: int = Field(description="The HTTP status the fork's request was answered with.")
    step_id: str | None = None
    url: str | None = None
    stored: bool | None = None
    error: Any = Field(default=None, description="The answer's error, when it has one.")
