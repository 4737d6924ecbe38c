"""Webhook sink: each violation becomes a JSON event POSTed to configured URLs.

Records arrive redacted (sinks.redacted), in the redacting thread: the event is built there
and handed to the event loop, where it waits in a bounded queue for one background task that
retries with exponential backoff; what cannot be queued or delivered is counted, never awaited.
With a secret, each POST carries `X-Loopwatch-Signature: sha256=<hex HMAC-SHA256 of the body>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import aiohttp
from yarl import URL

from gateway.background import Background
from gateway.items import Violation
from gateway.mcp.records import McpViolation
from gateway.step import Lineage, RefusalRecord, StepRecord

log = logging.getLogger(__name__)

DropHook = Callable[[str], None]  # reason: "queue_full" | "failed"
# Statuses worth another attempt; any other 4xx means the receiver will never take the event.
RETRY_STATUSES = frozenset({408, 425, 429})
SIGNATURE_HEADER = "X-Loopwatch-Signature"


def signature(secret: str, body: bytes) -> str:
    """What a receiver recomputes over the exact body bytes and compares in constant time."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _ignore(reason: str) -> None:
    return None


class WebhookSink:
    """A Sink that turns violations into webhook deliveries; start() and close() bracket it."""

    def __init__(
        self,
        urls: tuple[str, ...],
        *,
        public_url: str | None = None,
        secret: str | None = None,
        on_drop: DropHook = _ignore,
        queue_size: int = 1000,
        attempts: int = 5,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        timeout: float = 10.0,
    ) -> None:
        self._urls = urls
        self._public_url = public_url.rstrip("/") if public_url else None
        self._secret = secret
        self._on_drop = on_drop
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(queue_size)
        self._attempts = max(1, attempts)
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.delivered_total = 0

    async def start(self, owner: Background) -> None:
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._task = owner.task("loopwatch-webhooks", self._run())

    async def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued within `timeout`, then stop; the rest counts as dropped."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while not self._queue.empty():
            self._queue.get_nowait()
            self._on_drop("failed")
        if self._session is not None:
            await self._session.close()

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        if step.violations:
            at = step.started_at
            root = _root(step.trace_id, step.lineage)
            self._hand([self._event(v, root, step.id, at) for v in step.violations])

    def request_refused(self, refusal: RefusalRecord) -> None:
        at = refusal.created_at
        root = _root(refusal.trace_id, refusal.lineage)
        self._hand([self._event(v, root, None, at) for v in refusal.violations])

    def skipped(self, record: object) -> None:
        """A record `Redacting` had no room for: its violations' events are dropped."""
        if isinstance(record, McpViolation):
            self._on_drop("queue_full")
        for _ in getattr(record, "violations", ()):
            self._on_drop("queue_full")

    def mcp_violation(self, violation: McpViolation) -> None:
        """A violation found on the MCP side: the same event, with `source: "mcp"`."""
        trace_id = violation.trace_id
        link = f"{self._public_url}/traces/{trace_id}" if self._public_url and trace_id else None
        call_id = violation.call_id
        event = {
            "kind": violation.kind,
            "trace_id": trace_id,
            "root_trace_id": trace_id,  # the MCP side knows no tree: as the run's own
            "step_id": None,
            "call_id": call_id,
            "detail": violation.detail,
            "enforced": violation.enforced,
            "created_at": violation.created_at.isoformat(),
            "trace_url": link,
            "source": "mcp",
            "server": violation.server,
            "tool": violation.tool,
        }
        self._hand([event])

    def _event(
        self, violation: Violation, run: tuple[str, str], step_id: str | None, at: datetime
    ) -> dict[str, Any]:
        trace_id, root_trace_id = run
        link = f"{self._public_url}/traces/{trace_id}" if self._public_url else None
        call_id = violation.call_id
        return {
            "kind": violation.kind.value,
            "trace_id": trace_id,
            "root_trace_id": root_trace_id,  # its tree's root (its own id for a root)
            "step_id": step_id,
            "call_id": call_id,  # the client's string: redacted like any text
            "detail": violation.detail,
            "enforced": violation.enforced,
            "created_at": at.isoformat(),
            "trace_url": link,
        }

    def _hand(self, events: list[dict[str, Any]]) -> None:
        """Onto the event loop's queue: from another thread, through the loop."""
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            self._enqueue(events)
        else:
            loop.call_soon_threadsafe(self._enqueue, events)

    def _enqueue(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            try:
                self._queue.put_nowait(event)
            except asyncio.QueueFull:
                self._on_drop("queue_full")

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await asyncio.gather(*(self._deliver(url, event) for url in self._urls))
            except Exception:  # a bug here must not stop later deliveries
                log.exception("webhook delivery crashed")
            finally:
                self._queue.task_done()

    async def _deliver(self, url: str, event: dict[str, Any]) -> None:
        delay = self._backoff_initial
        for attempt in range(1, self._attempts + 1):
            outcome = await self._post(url, event)
            if outcome == "ok":
                self.delivered_total += 1
                return
            if outcome == "give_up" or attempt == self._attempts:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._backoff_max)
        log.warning("webhook %s: event %s not delivered", _origin(url), event["kind"])
        self._on_drop("failed")

    def _request(self, event: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = signature(self._secret, body)
        return body, headers

    async def _post(self, url: str, event: dict[str, Any]) -> str:
        assert self._session is not None, "start() first"
        body, headers = self._request(event)
        try:
            async with self._session.post(url, data=body, headers=headers) as response:
                if response.status < 300:
                    return "ok"
                retry = response.status >= 500 or response.status in RETRY_STATUSES
                return "retry" if retry else "give_up"
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("webhook %s unreachable: %r", _origin(url), exc)
            return "retry"


def _origin(url: str) -> str:
    """What a log line may name: a webhook's path or query often is its secret (Slack)."""
    try:
        return str(URL(url).origin())
    except ValueError:
        return "(invalid URL)"


def _root(trace_id: str, lineage: Lineage | None) -> tuple[str, str]:
    """A run's id and its tree's root's (its own when it is a root)."""
    return trace_id, trace_id if lineage is None else lineage.root_trace_id
