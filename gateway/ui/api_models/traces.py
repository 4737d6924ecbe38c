"""Traces (agent runs): as listed, and one in detail with its tree, steps and violations."""

from __future__ import annotations

from pydantic import Field

from gateway.runs.status import TraceStatus
from gateway.ui.api_models.common import ApiModel, Budget, Cursor, Timestamp, TreeTotals, Usage
from gateway.ui.api_models.mcp import Execution
from gateway.ui.api_models.steps import Step
from gateway.ui.api_models.violations import McpViolation, Refusal, Violation


class Trace(ApiModel):
    """What every reading of a trace says, listed or in detail."""

    id: str
    started_at: Timestamp
    updated_at: Timestamp
    status: TraceStatus = Field(description="At the time of the read: `running` while busy.")
    step_count: int
    models: list[str]
    usage: Usage
    violation_count: int
    has_violations: bool
    budget: Budget
    cost_usd: float | None = Field(description="Dollars; null when no step was priced.")
    cost_complete: bool
    duration_ms: float | None
    model_ms: float
    tool_ms: float
    session_id: str | None
    first_user_text: str | None
    replay_of: str | None = Field(description="The trace this run replays a cassette of.")
    diverged_at: int | None = Field(description="The step where the replay left the cassette.")
    fork_of: str | None = Field(description="The trace this run forks.")
    fork_at: int | None = Field(description="The step of `fork_of` it was forked at.")


class ListedTrace(Trace):
    parent_trace_id: str | None
    root_trace_id: str
    depth: int
    tree: TreeTotals


class TraceList(ApiModel):
    traces: list[ListedTrace]
    next_cursor: Cursor


class Parent(ApiModel):
    id: str
    call_id: str | None


class Child(ApiModel):
    """A sub-agent run as its parent shows it, with the call that started it."""

    id: str
    status: TraceStatus
    steps: int
    cost: float | None
    duration: float | None
    call_id: str | None


class Replay(ApiModel):
    """A run `loopwatch replay` made from this trace's cassette."""

    id: str
    status: TraceStatus
    started_at: str
    steps: int
    diverged_at: int | None = Field(
        description="The step whose request first differed from the recording; null: none did."
    )


class Fork(ApiModel):
    """A run `POST /api/traces/{trace_id}/fork` made from one of this trace's steps."""

    id: str
    status: TraceStatus
    started_at: str
    fork_at: int | None = Field(description="The step it forks.")
    models: list[str] = Field(description="The models the fork asked.")


class TraceDetail(Trace):
    parent: Parent | None
    children: list[Child]
    replays: list[Replay] = Field(description="The newest 100 replays, oldest first.")
    forks: list[Fork] = Field(description="The newest 100 forks of its steps, oldest first.")
    root_trace_id: str
    depth: int
    tree: TreeTotals
    steps: list[Step]
    next_steps_after: int | None = Field(
        description="Pass as `steps_after` for the next steps; null when none follow."
    )
    violations: list[Violation | McpViolation]
    refusals: list[Refusal]
    tool_executions: list[Execution]
