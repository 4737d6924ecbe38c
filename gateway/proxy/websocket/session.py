"""One client's socket: each request frame checked and made a step like an HTTP request, each
event frame the provider sends fed to the exchange of the response it belongs to.

A socket carries responses on lanes (the protocol's streams on one connection): a lane's
responses come back in the order their requests were sent, so the events on a lane belong
to the oldest response of that lane still open. A warm-up (a request that only prepares the
provider's state) is no step: it generates nothing, and the request that continues it is
recorded with the warm-up's input, the whole request the provider answers.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.exchange.machine import Command, Exchange, Finished, Outcome, Settle
from gateway.protocols.frames import ClientFrame, SocketAdapter
from gateway.proxy.admitting import Admitted, Refused, Request, begin, check, off_loop_if_large
from gateway.proxy.deps import Deps
from gateway.proxy.relay import Handler, Timing, execute_now
from gateway.routing import Target

WARMUPS_KEPT = 8  # warm-ups a socket remembers for the requests that continue them
Send = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class Pending:
    """A request sent upstream, until its response's final frame."""

    exchange: Exchange
    handler: Handler
    counted: str | None  # the protocol its relay is counted under (None: a warm-up)
    timing: Timing = field(default_factory=Timing)
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True, slots=True)
class Opened:
    """What the socket's upgrade settled for every request on it."""

    headers: Mapping[str, str]  # the client's upgrade request's
    target: Target  # the provider's socket every request goes to
    provider_request_id: str | None  # of the provider's upgrade response


class _WarmUp:
    """The end of a warm-up: its response id is kept for the request that continues it."""

    def __init__(self, kept: OrderedDict[str, dict[str, Any]], body: dict[str, Any]) -> None:
        self._kept, self._body = kept, body

    def settle(self, spent: Settle) -> None:
        return None

    def finished(self, outcome: Outcome, timing: Timing) -> None:
        if outcome.response_id is None or outcome.no_answer:
            return
        self._kept[outcome.response_id] = self._body
        while len(self._kept) > WARMUPS_KEPT:
            self._kept.popitem(last=False)


class Session:
    """The socket's state, shared by its two directions; the event loop's alone."""

    def __init__(
        self, deps: Deps, socket: SocketAdapter, opened: Opened, *, upstream: Send, client: Send
    ) -> None:
        self._deps = deps
        self._socket = socket
        self._opened = opened
        self._upstream = upstream
        self._client = client
        self._lanes: dict[str | None, deque[Pending]] = {}
        self._warmups: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._going_away = False
        self.closed = False

    def go_away(self) -> None:
        """The gateway stops: the socket is to close once no response is open on it."""
        self._going_away = True

    @property
    def leaving(self) -> bool:
        """Going away, and no response is open: the socket may close now."""
        return self._going_away and not self._lanes

    async def from_client(self, text: str) -> None:
        """A text frame from the client: a request is checked, then sent (or refused with
        the protocol's error event); any other frame is sent as it is."""
        started = time.perf_counter()
        frame = await off_loop_if_large(len(text), self._socket.client_frame, text)
        if frame is None:
            await self._upstream(text)
            return
        queue = self._lanes.get(frame.lane)
        if queue:
            # The step this request may continue is recorded before it is placed (the
            # provider answers a lane's requests in order anyway).
            await queue[-1].done.wait()
        if frame.warmup:
            adapter = self._socket.adapter
            exchange = Exchange(adapter, frames=self._socket.new_frame_decoder())
            await self._send(
                frame, text, Pending(exchange, _WarmUp(self._warmups, frame.body), None)
            )
            return
        checked = await self._check(frame, len(text))
        if isinstance(checked, Refused):
            headers = {**checked.error.headers, **checked.headers}
            await self._client(self._socket.error_frame(checked.error, frame.lane, headers))
            return
        await self._forward(frame, text, checked, started)

    async def _check(self, frame: ClientFrame, size: int) -> Admitted | Refused:
        kept = self._warmups.get(frame.continues or "")
        body = frame.body if kept is None else self._socket.after_warmup(kept, frame.body)
        target = self._opened.target
        request = Request(self._opened.headers, lambda parsed: target, size=size)
        return await check(self._deps, self._socket.adapter, request, body)

    async def _forward(
        self, frame: ClientFrame, text: str, admitted: Admitted, started: float
    ) -> None:
        adapter, clamp = self._socket.adapter, admitted.admission.clamp
        prepared = adapter.prepare_body(frame.body, admitted.parsed, max_tokens=clamp)
        sent = text if prepared.body is frame.body else self._socket.encode(frame, prepared.body)
        began = begin(
            self._deps,
            adapter,
            admitted,
            method="GET",
            path=self._socket.path,
            traceparent=self._opened.headers.get("traceparent"),
            started=started,
            frames=self._socket.new_frame_decoder(),
        )
        began.finisher.upstream_answered(self._opened.provider_request_id)
        self._deps.sinks.relay_started(adapter.name)
        await self._send(frame, sent, Pending(began.exchange, began.finisher, adapter.name))

    async def _send(self, frame: ClientFrame, text: str, pending: Pending) -> None:
        """Send a request with its response awaited on its lane; the socket closed first (a
        client gone while its request was checked), its step ends at once as the socket did."""
        if self.closed:
            self._execute(pending, pending.exchange.client_gone())
            return
        self._lanes.setdefault(frame.lane, deque()).append(pending)
        await self._upstream(text)  # a provider gone meanwhile ends it with the socket

    def from_upstream(self, text: str) -> None:
        """A text frame from the provider, the client has it already: an event of the oldest
        open response of its lane. An event of no response asked for here (a notice, a
        response the provider started by itself) is not observed."""
        if not self._lanes:  # nothing asked for: not even parsed
            return
        arrived = time.perf_counter()
        frame = self._socket.server_frame(text)
        queue = None if frame is None else self._lanes.get(frame.lane)
        if frame is None or not queue:
            return
        pending = queue[0]
        if pending.timing.first_chunk_at is None:
            pending.timing.first_chunk_at = arrived
        commands = pending.exchange.frame(frame)
        pending.timing.observe_seconds += time.perf_counter() - arrived
        if any(isinstance(command, Finished) for command in commands):
            queue.popleft()
            if not queue:
                del self._lanes[frame.lane]
        self._execute(pending, commands)

    def end(self, *, provider_broke: bool) -> None:
        """The socket closed: every response still open ends as its exchange decides (cut by
        the provider, or its client gone). Only the first call counts."""
        if self.closed:
            return
        self.closed = True
        lanes, self._lanes = self._lanes, {}
        for queue in lanes.values():
            for pending in queue:
                exchange = pending.exchange
                gone = exchange.provider_broke() if provider_broke else exchange.client_gone()
                self._execute(pending, gone)

    def _execute(self, pending: Pending, commands: list[Command]) -> None:
        """Settle and finish as the commands say (closing a socket is its pumps' part)."""
        execute_now(commands, pending.handler, pending.timing)
        if any(isinstance(command, Finished) for command in commands):
            pending.done.set()
            if pending.counted is not None:
                self._deps.sinks.relay_ended(pending.counted)
