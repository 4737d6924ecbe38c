"""What the MCP side remembers besides executions: each session's protocol version, each
server's tool list as last seen, and the runs that recently used each server (what a
changed tool list is recorded on). Sans-IO."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gateway.mcp import checks
from gateway.mcp.requests import Context

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
MAX_REMEMBERED = 10_000  # sessions, or runs of a server, oldest forgotten first


class Versions:
    def __init__(self) -> None:
        self._by_session: OrderedDict[str, str] = OrderedDict()  # newest last

    def of(self, context: Context, meta: dict[str, Any] | None = None) -> str | None:
        """The request's header, its session's `initialize` answer, or (2026-07-28) the
        version each request names in its `_meta`."""
        if context.protocol_version:
            return context.protocol_version
        known = self._by_session.get(context.session_id or "")
        named = (meta or {}).get(PROTOCOL_VERSION_META)
        return known or (named if isinstance(named, str) else None)

    def initialized(self, context: Context, result: dict[str, Any]) -> None:
        version = result.get("protocolVersion")
        if isinstance(version, str) and context.session_id:
            self._by_session[context.session_id] = version
            while len(self._by_session) > MAX_REMEMBERED:
                self._by_session.popitem(last=False)


class ToolLists:
    def __init__(self, window: float, now: Callable[[], float]) -> None:
        self.tools: dict[str, dict[str, dict[str, Any]]] = {}  # server -> tool -> its entry
        self._window = window
        self._now = now
        self._traces: dict[str, dict[str, float]] = {}  # server -> run -> last seen

    def listed(self, server: str, paged: bool, listed: list[Any]) -> list[tuple[str, str]]:
        """A `tools/list` answer (`paged`: a later page); the (tool, change) it brings."""
        page = checks.tools_by_name(listed)
        before = self.tools.get(server)
        changes: list[tuple[str, str]] = []
        if paged and before is not None:
            after = {**before, **page}  # a later page adds to the list
        else:
            after = page
            changes = checks.list_changes(before, after) if before is not None else []
        self.tools[server] = after
        return changes

    def used(self, server: str, trace_id: str | None) -> None:
        if trace_id is not None:
            traces = self._traces.setdefault(server, {})
            traces[trace_id] = self._now()
            if len(traces) > MAX_REMEMBERED:
                traces.pop(next(iter(traces)))

    def running(self, server: str) -> set[str]:
        """Runs with an execution on this server within the window."""
        now = self._now()
        seen = self._traces.get(server, {})
        return {trace for trace, at in seen.items() if now - at <= self._window}
