"""Joins and deliveries one gateway process cannot see in its memory (the model step went
through another worker or replica): looked up in the store, off the event loop, a while
after the call, then less and less often until the match window has passed.

Nothing runs while nothing waits: the task sleeps on an event, not a timer loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.engine import Engine

from gateway import jsoncodec
from gateway.background import Background
from gateway.mcp.observer import McpObserver
from gateway.mcp.records import Execution, Outbox
from gateway.mcp.texts import args_key
from gateway.redaction.redactor import Redactor
from gateway.store.read import joins as mcp_joins
from gateway.store.read.joins import Wanted

log = logging.getLogger(__name__)

FIRST_LOOK = 0.2  # seconds: another process's step is stored by then, most of the time
MAX_DELAY = 30.0
# Look-ups due within this much of the soonest go with it: under a steady stream of calls
# the store is asked a few times a second for many executions, not once for each.
GATHER_SECONDS = 0.25
Entry = tuple[float, int, str, Execution, float]  # due, order, kind, execution, delay


class StoreJoins:
    def __init__(
        self,
        observer: McpObserver,
        emit: Callable[[Outbox], None],
        engine: Engine,
        redactor: Redactor,
        window: float,
        background: Background,
    ) -> None:
        self._background = background
        self._observer = observer
        self._emit = emit  # records go where the observer's others go
        self._engine = engine
        self._redactor = redactor
        self._window = window
        self._due: list[Entry] = []  # a heap, soonest first
        self._keys: dict[str, frozenset[str]] = {}  # by execution: computed once
        self._order = itertools.count()
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._looking = asyncio.Lock()
        self._closed = False

    def wake(self) -> None:
        """New executions may wait: schedule their first look-up."""
        self._woken.set()
        if not self._closed and (self._task is None or self._task.done()):
            self._task = self._background.task("mcp-joins", self._run())

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def look_up_now(self) -> None:
        """Everything waiting, looked up at once (a flush wants to see the store's joins);
        a call joined so looks its delivery up in a second round."""
        for _ in range(2):
            self._take_fresh()
            entries, self._due = self._due, []
            await self._look_up(entries)
            if not self._observer.fresh:
                return

    async def _run(self) -> None:
        while True:
            self._woken.clear()
            self._take_fresh()
            if not self._due:
                await self._woken.wait()
                continue
            wait = self._due[0][0] - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), wait)
                continue
            until, entries = time.monotonic() + GATHER_SECONDS, []
            while self._due and self._due[0][0] <= until:
                entries.append(heapq.heappop(self._due))
            await self._look_up(entries)

    def _take_fresh(self) -> None:
        fresh, self._observer.fresh = self._observer.fresh, []
        due = time.monotonic() + FIRST_LOOK
        for kind, execution in fresh:
            heapq.heappush(self._due, (due, next(self._order), kind, execution, FIRST_LOOK))

    async def _look_up(self, entries: list[Entry]) -> None:
        observer = self._observer
        async with self._looking:
            observer.forget_old(observer.monotonic())
            live = [e for e in entries if observer.pending(e[2], e[3])]
            for gone in {e[3].id for e in entries} - {e[3].id for e in live}:
                self._keys.pop(gone, None)
            if not live:
                return
            joins = {e[3].id: e[3] for e in live if e[2] == "join"}
            deliveries = {e[3].call_id: e[3] for e in live if e[2] == "delivery" and e[3].call_id}
            wanted = [self._wanted(execution) for execution in joins.values()]
            try:
                found, given = await asyncio.to_thread(self._read, wanted, set(deliveries))
            except Exception:  # the store is away: these wait for their next look
                log.warning("looking MCP joins up in the store failed", exc_info=True)
                self._again(live)
                return
            out = Outbox()
            for execution_id, calls in found.items():
                if not calls:
                    observer.not_in_store(execution_id, out)
                elif len(calls) == 1:
                    observer.joined_in_store(execution_id, calls[0].trace_id, calls[0].call_id, out)
                else:  # several qualify: never guessed
                    observer.joined_in_store(execution_id, None, None, out)
            for call_id, text in given.items():
                # The store holds a tool result as redacted (JSON compacted): compared so.
                observer.delivered(call_id, text, out, self._redactor.redact_json_text)
            self._emit(out)
            self._again([e for e in live if observer.pending(e[2], e[3])])

    def _read(
        self, wanted: list[Wanted], call_ids: set[str]
    ) -> tuple[dict[str, list[mcp_joins.Found]], dict[str, str]]:
        found = mcp_joins.model_calls(self._engine, wanted) if wanted else {}
        given = mcp_joins.tool_results(self._engine, call_ids) if call_ids else {}
        return found, given

    def _wanted(self, execution: Execution) -> Wanted:
        """Its arguments' keys as sent and as the store holds a model's (redacted)."""
        keys = self._keys.get(execution.id)
        if keys is None:
            arguments = execution.arguments
            redacted = self._redactor.redact_value(arguments)
            as_text = self._redactor.redact_text(jsoncodec.dumps_text(arguments))
            keys = frozenset({args_key(arguments), args_key(redacted), args_key(as_text)})
            self._keys[execution.id] = keys
        return Wanted(
            execution_id=execution.id,
            tool=execution.tool,
            keys=keys,
            since=execution.started_at - timedelta(seconds=self._window),
            trace_id=execution.trace_id,
            call_id=execution.call_id,
        )

    def _again(self, entries: list[Entry]) -> None:
        """Looked up in vain: again later, while the window lasts."""
        now, observed = time.monotonic(), self._observer.monotonic()
        for _, _, kind, execution, delay in entries:
            if observed - execution.started > self._window:
                self._keys.pop(execution.id, None)
                continue
            later = min(delay * 2, MAX_DELAY)
            heapq.heappush(self._due, (now + later, next(self._order), kind, execution, later))
