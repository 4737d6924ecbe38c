"""The one redaction of what leaves the gateway: records reach exporters redacted once.

The exporters that carry text (OTLP, webhooks) sit behind `Redacting`, itself a sink. On the
event loop it only enqueues the record as the bus hands it over; one thread redacts each
record once, with the gateway's one Redactor and by the rules the recorder stores it by
(`redact_step`, `redact_refusal`, MCP records' `redact_exported`; reasoning summaries dropped
unless stored, opaque reasoning payloads always), and hands the same frozen copy to every
exporter. An exporter's hooks so run in that thread: quick, never raising, and thread-safe.
The metrics sink stays in front (its numbers are read on the event loop; its model label is
a cached label, not a record).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from typing import Any

from gateway.background import Background
from gateway.mcp.records import Execution, McpViolation
from gateway.mcp.redacted import redact_exported
from gateway.redaction.redactor import Redactor, without_opaque, without_reasoning_summaries
from gateway.sinks.base import EVENTS, Sinks
from gateway.step import RefusalRecord, StepRecord

log = logging.getLogger(__name__)

QUEUE_SIZE = 10_000  # records waiting for redaction; past it, each exporter counts a drop
_Job = tuple[str, Any, tuple[Any, ...]] | threading.Event | None


class Redacting:
    """A Sink handing exporters redacted records; start() and close() bracket it."""

    def __init__(
        self,
        redactor: Redactor,
        exporters: Sinks,
        *,
        keep_summaries: bool = False,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.exporters = exporters
        self._redactor = redactor
        self._keep_summaries = keep_summaries
        self._jobs: queue.Queue[_Job] = queue.Queue(queue_size)
        # An event no exporter observes is not redacted at all (webhooks take no executions).
        self._observed = frozenset(e for e in EVENTS if any(hasattr(x, e) for x in exporters))
        self._worker: threading.Thread | None = None

    def start(self, owner: Background) -> None:
        self._worker = owner.thread("loopwatch-redacting", self._run)

    # The Sink: called on the event loop; O(1) and never raises.

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        self._enqueue("step_finished", step, overhead_seconds)

    def request_refused(self, refusal: RefusalRecord) -> None:
        self._enqueue("request_refused", refusal)

    def mcp_execution(self, execution: Execution, declared: bool) -> None:
        self._enqueue("mcp_execution", execution, declared)

    def mcp_violation(self, violation: McpViolation) -> None:
        self._enqueue("mcp_violation", violation)

    def _enqueue(self, event: str, record: Any, *rest: Any) -> None:
        if event not in self._observed:
            return
        try:
            self._jobs.put_nowait((event, record, rest))
        except queue.Full:
            self._skipped(record)

    # Lifecycle, from threads (asyncio.to_thread): both may block up to `timeout`.

    def flush(self, timeout: float = 10.0) -> bool:
        """Every record enqueued so far has reached the exporters, and those that flush
        (OTLP) have exported it, when this returns True."""
        deadline = time.monotonic() + timeout
        reached = threading.Event()
        try:
            self._jobs.put(reached, timeout=timeout)
        except queue.Full:
            return False
        if not reached.wait(timeout):
            return False
        for exporter in self.exporters:
            flush = getattr(exporter, "flush", None)
            if flush is not None and not flush(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Hand over what is queued within `timeout`; what is left then each exporter counts
        as dropped. The exporters are closed after."""
        if self._worker is not None and self._worker.is_alive():
            with contextlib.suppress(queue.Full):
                self._jobs.put(None, timeout=timeout)
            self._worker.join(timeout)
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if isinstance(job, tuple):
                self._skipped(job[1])

    def _skipped(self, record: Any) -> None:
        for exporter in self.exporters:  # each counts it as it counts its own drops
            skipped = getattr(exporter, "skipped", None)
            if skipped is not None:
                skipped(record)

    # The worker thread.

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if isinstance(job, threading.Event):
                job.set()
                continue
            event, record, rest = job
            try:
                redacted = self._redacted(record)
            except Exception:  # never exported unredacted
                log.exception("redaction of a record for export failed")
                continue
            getattr(self.exporters, event)(redacted, *rest)

    def _redacted(self, record: Any) -> Any:
        """The record as the recorder stores it (MCP records: with the ids they carry)."""
        if isinstance(record, StepRecord):
            if not self._keep_summaries:
                record = without_reasoning_summaries(record)
            return self._redactor.redact_step(without_opaque(record))
        if isinstance(record, RefusalRecord):
            return self._redactor.redact_refusal(record)
        return redact_exported(self._redactor, record)
