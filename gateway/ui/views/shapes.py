"""The view model of a trace page: rows of steps and refused requests, spans in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.ui.views.billed import provider_facts
from gateway.ui.views.items import ItemView
from gateway.ui.views.request import RequestView, request_view
from gateway.ui.views.text import TextView


@dataclass(frozen=True, slots=True)
class Span:
    """A bar in a waterfall row; x and width in milliseconds since the trace began."""

    kind: str  # wait | stream | tool | open | refusal
    start: float
    width: float
    title: str = ""


@dataclass(slots=True)
class StepView:
    id: str
    seq: int
    anchor: str
    step: dict[str, Any]
    offset_ms: float
    end_ms: float
    tool_ms: float | None  # the agent's time before this request
    cost_usd: float | None = None
    cost_source: str | None = None
    tokens: int = 0
    inputs: list[ItemView] = field(default_factory=list)
    outputs: list[ItemView] = field(default_factory=list)
    digest_in: str = ""
    digest_out: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    error: TextView | None = None
    spans: list[Span] = field(default_factory=list)
    retry_of: int | None = None  # the seq of the failed step this one repeats
    retried_by: int | None = None
    href: str = ""  # the step's own page
    same_tools_as: StepView | None = None  # an earlier step that declared the same tools

    @property
    def row_kind(self) -> str:
        return "step"

    @property
    def executions(self) -> list[str]:
        """Ids of the MCP executions of its tool calls: a link to one opens this row."""
        return [str(ex["id"]) for item in self.outputs for ex in item.executions]

    @property
    def provider_facts(self) -> list[tuple[str, str]]:
        """What its provider said beyond the tokens (answering model, tools it ran, ...)."""
        return provider_facts(self.step)

    @property
    def request(self) -> RequestView:
        """Its parameters, tools and raw record: built only for a body being rendered."""
        return request_view(self.step)


@dataclass(slots=True)
class RefusalView:
    """A request refused before the provider: its rules, call ids and (when kept) items."""

    id: str
    anchor: str
    offset_ms: float
    created_at: str | None
    violations: list[dict[str, Any]]
    items: list[ItemView] | None  # None: the store kept no items of refused requests
    digest: str = ""
    spans: list[Span] = field(default_factory=list)

    @property
    def row_kind(self) -> str:
        return "refusal"

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(str(v.get("kind")) for v in self.violations))


Row = StepView | RefusalView
