"""The MCP observer: events in (a request, its answer, a model step), records out. It joins
each `tools/call` to its run and model call, judges it, and marks its delivery. Sans-IO."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from gateway import ids
from gateway.checks.tools import ToolChecker
from gateway.items import ItemKind
from gateway.mcp import checks
from gateway.mcp.joining import ModelCalls, otel_trace_id
from gateway.mcp.messages import McpRequest
from gateway.mcp.records import (
    Execution,
    McpViolation,
    MethodCall,
    Outbox,
    ToolList,
    new_violation,
    violation_of,
)
from gateway.mcp.requests import Context, Refusal, Tracked
from gateway.mcp.sessions import ToolLists, Versions
from gateway.mcp.texts import mcp_names
from gateway.mcp.waiting import MAX_WAITING, Waiting
from gateway.step import StepRecord


class McpObserver(Waiting):
    def __init__(
        self,
        *,
        checker: ToolChecker | None = None,
        window: float = 300.0,
        enforce: bool = False,
        clock: Callable[[], datetime] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        otel_id: Callable[[str], int] | None = None,
    ) -> None:
        self.calls = ModelCalls(window, otel_id)
        self.lists = ToolLists(window, monotonic)
        self.tools = self.lists.tools  # by server: its tools as last listed
        self.versions = Versions()
        self._checker = checker or ToolChecker()
        self._enforce = enforce
        self._clock = clock or (lambda: datetime.now(UTC))
        self._now = monotonic
        super().__init__(window)
        self._over_budget: OrderedDict[str, str] = OrderedDict()  # trace -> violation kind

    # -- a request -------------------------------------------------------------------------

    def request(
        self,
        context: Context,
        request: McpRequest,
        out: Outbox,
        *,
        can_refuse: bool = True,
        sent: tuple[datetime, float] | None = None,
    ) -> Tracked | Refusal:
        """A request seen on its way to the server; a Refusal when the gateway answers it
        (`can_refuse` False: the message is only reported, as over stdio). `sent`: when it
        went upstream (wall clock, monotonic), when it is observed afterwards."""
        enforce = self._enforce and can_refuse
        started, started_mono = sent or (self._clock(), self._now())
        tracked = Tracked(request, context, started, started_mono)
        tracked.trace_id = self._explicit_trace(context, request.meta)
        if request.method != "tools/call" or request.tool is None:
            return tracked
        execution = Execution(
            id="ex-" + ids.new_step_id()[3:],
            server=context.server,
            tool=request.tool,
            arguments=request.arguments,
            started_at=tracked.started_at,
            rpc_id=request.rpc_id,
            protocol_version=self.versions.of(context, request.meta),
            session_id=context.session_id,
            started=tracked.started,
        )
        tracked.execution = execution
        self._join(execution, context, request.meta)
        if enforce:  # judged before the server is called; else once it answered
            problems = self._problems(execution, enforce)
            if problems:
                return self._refuse(execution, problems, out)
            tracked.judged = True
        self.lists.used(execution.server, execution.trace_id)
        if execution.trace_id is None or execution.call_id is None:
            self._remember(self._waiting, execution.id, execution)
            if execution.join != "ambiguous":
                self._pending("join", execution)
        return tracked

    def _problems(self, execution: Execution, enforce: bool) -> list[tuple[str, str]]:
        """(kind, detail) of what this call breaks, the rule to name first. Observed only,
        a call no model call asked for is judged once the store was asked too
        (`not_in_store`): the model's step may have gone through another process."""
        problems = checks.call_problems(
            self._checker, self.tools.get(execution.server), execution.tool, execution.arguments
        )
        unasked = checks.unasked(execution.tool, execution.call_id, execution.join)
        if unasked is not None and enforce:
            problems.insert(0, unasked)
        spent = self._over_budget.get(execution.trace_id or "")
        if enforce and spent is not None:
            detail = f"Its run is over its budget ({spent}): its tool calls are refused too."
            problems.insert(0, (spent, detail))
        return problems

    def _explicit_trace(self, context: Context, meta: dict[str, Any]) -> str | None:
        if context.trace_header:
            return context.trace_header
        if isinstance(meta.get("loopwatch/trace_id"), str):
            return str(meta["loopwatch/trace_id"])
        otel = otel_trace_id(context.traceparent or meta.get("traceparent"))
        return None if otel is None else self.calls.trace_of_otel(otel)

    def _join(self, execution: Execution, context: Context, meta: dict[str, Any]) -> None:
        call_id = meta.get("loopwatch/tool_call_id")
        if context.trace_header:
            execution.trace_id, execution.join = context.trace_header, "header"
        elif isinstance(meta.get("loopwatch/trace_id"), str):
            execution.trace_id, execution.join = meta["loopwatch/trace_id"], "meta"
        elif isinstance(call_id, str):
            execution.call_id, execution.join, execution.explicit = call_id, "meta", True
            call = self.calls.by_call_id(call_id)
            if call is not None:
                execution.trace_id, call.matched = call.trace_id, True
            return
        else:
            found = self._explicit_trace(context, meta)
            if found is not None:
                execution.trace_id, execution.join = found, "traceparent"
        execution.explicit = execution.trace_id is not None
        self._match_content(execution)

    def _match_content(self, execution: Execution) -> bool:
        """Name the model call this execution runs; True when it was newly joined."""
        within = execution.trace_id if execution.explicit else None
        found = self.calls.candidates(execution.tool, execution.arguments, self._now(), within)
        if execution.explicit or len(found) == 1:
            if not found:
                return False
            call = found[0]
            call.matched = True
            execution.call_id, execution.trace_id = call.call_id, call.trace_id
            if not execution.explicit:
                execution.join = "content"
            return True
        execution.join = "ambiguous" if found else "none"
        return False

    def _refuse(
        self, execution: Execution, problems: list[tuple[str, str]], out: Outbox
    ) -> Refusal:
        execution.outcome, execution.duration_ms = "refused", 0.0
        for kind, detail in problems:
            out.add(self._violation(execution, kind, detail, enforced=True))
        out.finish(execution)
        rule, detail = problems[0]
        return Refusal(
            execution.rpc_id, rule, f"Loopwatch refused this tool call ({rule}): {detail}"
        )

    # -- its answer ------------------------------------------------------------------------

    def answered(
        self,
        tracked: Tracked,
        message: dict[str, Any] | None,
        out: Outbox,
        at: float | None = None,
    ) -> None:
        """The request's JSON-RPC response (read at monotonic time `at`), or None when none
        came (`failed` said why). Without enforcement a call's own rules are judged here,
        after its answer went to the client."""
        milliseconds = round(((self._now() if at is None else at) - tracked.started) * 1000, 3)
        request = tracked.request
        error = message.get("error") if message is not None else None
        result = message.get("result") if message is not None else None
        if request.method == "initialize" and isinstance(result, dict):
            self.versions.initialized(tracked.context, result)
        if request.method == "tools/list" and isinstance(result, dict):
            self._tool_list(tracked, request, result, out)
        if tracked.execution is not None:
            self._executed(tracked, milliseconds, message, out)
            return
        outcome = "ok" if message is not None and error is None else "rpc_error"
        version = self.versions.of(tracked.context)
        out.add(
            MethodCall(
                tracked.context.server,
                request.method,
                tracked.started_at,
                milliseconds,
                outcome,
                tracked.trace_id,
                version,
            )
        )

    def _executed(
        self, tracked: Tracked, milliseconds: float, message: dict[str, Any] | None, out: Outbox
    ) -> None:
        execution = tracked.execution
        assert execution is not None
        if not tracked.judged:
            tracked.judged = True
            for kind, detail in self._problems(execution, False):
                out.add(self._violation(execution, kind, detail))
        execution.duration_ms = milliseconds
        error = message.get("error") if message is not None else None
        if message is None or error is not None:
            execution.outcome = "rpc_error"
            if isinstance(error, dict) or execution.error is None:
                execution.error = error if isinstance(error, dict) else {"message": "no answer"}
        else:
            result = message.get("result")
            execution.result = result
            execution.is_error = bool(isinstance(result, dict) and result.get("isError"))
            execution.outcome = "tool_error" if execution.is_error else "ok"
            tools = self.tools.get(execution.server)
            problem = checks.output_problem(self._checker, tools, execution.tool, result)
            if problem is not None:
                out.add(self._violation(execution, *problem))
        out.finish(execution)
        if execution.call_id is not None:
            self._await_delivery(execution)

    def failed(self, tracked: Tracked, reason: str, out: Outbox) -> None:
        """No JSON-RPC answer: an HTTP error status, or the exchange broke."""
        if tracked.execution is not None:
            tracked.execution.error = {"message": reason}
        self.answered(tracked, None, out)

    def _tool_list(
        self, tracked: Tracked, request: McpRequest, result: dict[str, Any], out: Outbox
    ) -> None:
        listed = result.get("tools")
        if not isinstance(listed, list):
            return
        server = tracked.context.server
        for tool, change in self.lists.listed(server, "cursor" in request.params, listed):
            self._list_changed(server, tracked.trace_id, tool, change, out)
        out.add(ToolList(server, list(self.tools[server].values()), self._clock()))

    def _list_changed(
        self, server: str, trace_id: str | None, tool: str, change: str, out: Outbox
    ) -> None:
        running, now = self.lists.running(server), self._clock()
        detail = f"MCP server {server!r} changed its tool list: tool {tool!r} {change}."
        for trace in sorted(running | ({trace_id} if trace_id else set())):
            out.add(
                new_violation(server, checks.LIST_CHANGED, detail, now, trace_id=trace, tool=tool)
            )
        if not running and trace_id is None:
            out.add(new_violation(server, checks.LIST_CHANGED, detail, now, tool=tool))

    # -- a model step ----------------------------------------------------------------------

    def step(self, step: StepRecord, out: Outbox) -> None:
        """A finished model step: its tool calls may be what waiting executions run, and its
        tool results may deliver executed ones to the model."""
        now = self._now()
        added = self.calls.add(step.trace_id, step.output_items, now)
        self.forget_old(now)
        names = {name for call in added for name in mcp_names(call.tool_name)}
        call_ids = {call.call_id for call in added}
        for key, execution in list(self._waiting.items() if added else ()):
            if execution.tool not in names and execution.call_id not in call_ids:
                continue
            if self._join_late(execution):
                del self._waiting[key]
                self._joined(execution, out)
        for item in step.input_items:
            if item.kind is ItemKind.TOOL_RESULT and item.call_id is not None:
                self.delivered(item.call_id, item.text or "", out)

    def _joined(self, execution: Execution, out: Outbox) -> None:
        """A waiting execution found its run: recorded again, its violations with it, but for
        an `unrequested_tool_execution` the model's call now answers: withdrawn."""
        self.lists.used(execution.server, execution.trace_id)
        asked = checks.unasked(execution.tool, execution.call_id, execution.join) is None
        for violation in self._held.pop(execution.id, ()):
            if asked and violation.kind == checks.UNREQUESTED:
                out.add(replace(violation, withdrawn=True))
                continue
            out.add(replace(violation, trace_id=execution.trace_id, call_id=execution.call_id))
            out.moved.add(violation.id)
        if execution.outcome is not None:
            out.add(execution)
            if execution.call_id is not None:
                self._await_delivery(execution)

    # -- what the store tells (another gateway process saw the model's side) --------------

    def joined_in_store(
        self, execution_id: str, trace_id: str | None, call_id: str | None, out: Outbox
    ) -> None:
        """The store names the model call (None: several qualify) of a waiting execution."""
        execution = self._waiting.pop(execution_id, None)
        if execution is None:
            return
        if call_id is None or trace_id is None:
            if execution.trace_id is None:
                execution.join = "ambiguous"
                self._held.pop(execution.id, None)
                if execution.outcome is not None:
                    out.add(execution)
            return
        execution.trace_id, execution.call_id = trace_id, call_id
        if execution.join in ("none", "ambiguous"):
            execution.join = "content"
        self._joined(execution, out)

    def not_in_store(self, execution_id: str, out: Outbox) -> None:
        """The store knows no model call for this answered execution either (of its run, or
        of any run when it names none): judged as enforcement judges it before the call
        (judged once; a later join still names the call)."""
        execution = self._waiting.get(execution_id)
        if (
            execution is None
            or execution.outcome not in ("ok", "tool_error", "rpc_error")
            or execution.judged_unrequested
        ):
            return
        unasked = checks.unasked(execution.tool, execution.call_id, execution.join)
        if unasked is not None:
            execution.judged_unrequested = True
            out.add(self._violation(execution, *unasked))

    def _join_late(self, execution: Execution) -> bool:
        if execution.call_id is not None and execution.trace_id is None:
            call = self.calls.by_call_id(execution.call_id)
            if call is None:
                return False
            execution.trace_id, call.matched = call.trace_id, True
            return True
        return self._match_content(execution)

    def budget_refused(self, trace_id: str, kind: str) -> None:
        """A model request of this run was refused by a budget: with enforcement, so are
        its MCP tool calls from now on."""
        self._over_budget[trace_id] = kind
        while len(self._over_budget) > MAX_WAITING:
            self._over_budget.popitem(last=False)

    # -- helpers ---------------------------------------------------------------------------

    @property
    def enforcing(self) -> bool:
        """Whether requests are judged before they go upstream (else once sent)."""
        return self._enforce

    def sent(self) -> tuple[datetime, float]:
        """Now, as a request's start: wall clock and monotonic."""
        return self._clock(), self._now()

    def monotonic(self) -> float:
        return self._now()

    def _violation(
        self, execution: Execution, kind: str, detail: str, *, enforced: bool = False
    ) -> McpViolation:
        violation = violation_of(execution, kind, detail, self._clock(), enforced=enforced)
        self._hold(execution, violation)
        return violation
