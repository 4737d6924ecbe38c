"""What the MCP side records: tool executions, other methods, tool lists, violations."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from gateway import ids

# How an execution joined a trace; `none` and `ambiguous` joined none.
JOINS = ("header", "meta", "traceparent", "content", "none", "ambiguous")
OUTCOMES = ("ok", "tool_error", "rpc_error", "refused")
DELIVERIES = ("delivered", "truncated", "transformed")


@dataclass(slots=True)
class Execution:
    """One `tools/call`; the observer owns it and hands out frozen copies to record."""

    id: str
    server: str
    tool: str
    arguments: Any
    started_at: datetime
    rpc_id: Any = None
    protocol_version: str | None = None
    session_id: str | None = None
    trace_id: str | None = None
    call_id: str | None = None
    join: str = "none"
    result: Any = None
    is_error: bool | None = None
    error: dict[str, Any] | None = None
    outcome: str | None = None  # None while the server has not answered
    duration_ms: float | None = None
    delivery: str | None = None
    started: float = 0.0  # monotonic seconds, for the duration
    explicit: bool = False  # joined by header, _meta or traceparent: content only names a call
    judged_unrequested: bool = False  # its run's model calls were looked for, in vain

    def snapshot(self) -> Execution:
        return replace(self, arguments=self.arguments, result=self.result)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "trace_id": self.trace_id,
            "join": self.join,
            "server": self.server,
            "tool": self.tool,
            "arguments": self.arguments,
            "result": self.result,
            "is_error": self.is_error,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "protocol_version": self.protocol_version,
            "delivery": self.delivery,
        }


@dataclass(frozen=True, slots=True)
class MethodCall:
    """A request other than `tools/call`: what it was, how long, how it ended."""

    server: str
    method: str
    started_at: datetime
    duration_ms: float | None
    outcome: str
    trace_id: str | None = None
    protocol_version: str | None = None


@dataclass(frozen=True, slots=True)
class ToolList:
    """A server's `tools/list` as last seen."""

    server: str
    tools: list[dict[str, Any]]
    seen_at: datetime


@dataclass(frozen=True, slots=True)
class McpViolation:
    """A rule broken on the MCP side (`source: "mcp"`)."""

    id: str
    kind: str
    detail: str
    created_at: datetime
    server: str
    trace_id: str | None = None
    execution_id: str | None = None
    call_id: str | None = None
    tool: str | None = None
    enforced: bool = False
    # Judged before its execution joined a model call recorded later (a tool run while the
    # model still streamed): the judgment is taken back.
    withdrawn: bool = False


Record = Execution | MethodCall | ToolList | McpViolation


def new_violation(
    server: str, kind: str, detail: str, created_at: datetime, **fields: Any
) -> McpViolation:
    return McpViolation(
        id="mv-" + ids.new_step_id()[3:],
        kind=kind,
        detail=detail,
        created_at=created_at,
        server=server,
        **fields,
    )


def violation_of(
    execution: Execution, kind: str, detail: str, created_at: datetime, *, enforced: bool
) -> McpViolation:
    """A violation of one execution, on its run and call as far as they are known."""
    return new_violation(
        execution.server,
        kind,
        detail,
        created_at,
        trace_id=execution.trace_id,
        execution_id=execution.id,
        call_id=execution.call_id,
        tool=execution.tool,
        enforced=enforced,
    )


@dataclass(slots=True)
class Outbox:
    """What one observer event produced, to record and to count."""

    records: list[Record] = field(default_factory=list)
    finished: list[Execution] = field(default_factory=list)  # answered or refused just now
    # Violations found before and stored again now with the run their execution joined:
    # counted and announced once, when found.
    moved: set[str] = field(default_factory=set)

    def finish(self, execution: Execution) -> None:
        frozen = execution.snapshot()
        self.records.append(frozen)
        self.finished.append(frozen)

    def add(self, record: Record) -> None:
        self.records.append(record.snapshot() if isinstance(record, Execution) else record)
