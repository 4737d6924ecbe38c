"""The response tap: reads a copy of what the provider sends, beside the bytes to the client.

It lives under the exchange, which decides what its readings mean. It never raises: a
failure stops observing, never forwarding (STYLE rule 12).
"""

from __future__ import annotations

import logging
from typing import Any

from gateway import jsoncodec
from gateway.exchange.stops import Seen, seen_by
from gateway.items import Usage
from gateway.protocols.base import ProtocolAdapter
from gateway.stream import codings
from gateway.stream.assembler import Assembler, State
from gateway.stream.sse import SSEDecoder, SSEEvent

log = logging.getLogger(__name__)

# A body (or stream) larger than this, once inflated, is forwarded but not parsed.
MAX_PARSED_BODY = 64 * 1024 * 1024


class ResponseTap:
    def __init__(
        self,
        adapter: ProtocolAdapter,
        *,
        status: int,
        is_sse: bool,
        content_encoding: str | None,
        hide_usage_event: bool = False,
        content_length: int | None = None,
    ) -> None:
        encoding = codings.coding(content_encoding)
        self._adapter = adapter
        self._status = status
        self._is_sse = is_sse
        # An encoded body is never rewritten: hiding an event would mean re-encoding it or
        # sending the client decoded bytes unbounded, so the bytes and headers pass exactly as
        # the provider sent them (a usage event the client did not ask for included) and only
        # a bounded copy is inflated, for observing.
        self._hide = hide_usage_event and is_sse and encoding in codings.IDENTITY
        self._assembler = Assembler()
        self._sse = SSEDecoder() if is_sse else None
        self._events = adapter.new_event_decoder() if is_sse else None
        self._body = bytearray()
        # A whole body is decoded the moment its last byte arrives, so the step's end (and
        # its budget settlement) is known before the client can send its next request.
        self._length = content_length
        self._received = 0
        self._decoded = False
        self._broken: str | None = None
        self._released: list[SSEEvent] = []  # events given to the client, not yet observed
        self._inflate = codings.decompressor(encoding) if encoding in codings.INFLATED else None
        self._inflated_bytes = 0
        if encoding not in codings.IDENTITY and self._inflate is None:
            self._broken = f"content-encoding {content_encoding} is not parsed"

    @property
    def ended(self) -> bool:
        """The protocol's completion marker has arrived (usage is then final)."""
        return self._assembler.state is State.ENDED

    @property
    def usage(self) -> Usage:
        return self._assembler.usage

    @property
    def holds_back(self) -> bool:
        """True while bytes are released per event (one event is hidden from the client)."""
        return self._hide and self._broken is None

    def feed(self, chunk: bytes) -> bytes:
        """Observe `chunk`; return the bytes the client should get for it.

        Without hiding that is `chunk` itself. With hiding (we asked for usage the client did
        not), bytes are released per complete event, minus the usage-only event.
        """
        self._received += len(chunk)
        if self._broken is not None:
            return chunk
        held = self._sse.pending_raw if (self._hide and self._sse is not None) else b""
        try:
            data = self._inflated(chunk) if self._inflate else chunk
            if self._broken is not None:  # inflated past what is parsed: forward only
                return chunk
            if self._sse is None:
                self._keep_body(data)
                if self._received == self._length and self._status < 400:
                    self._decode_body()
                return chunk
            events = self._sse.decode(data)
            out = self._visible(events) if self._hide else chunk
        except Exception as exc:  # an observer bug must not break forwarding
            self._give_up(exc)
            return held + chunk if self._hide else chunk
        try:
            self._observe(events)
        except Exception as exc:
            self._give_up(exc)
            if self._hide:  # from now on bytes pass as they come: release what is held
                out += self._sse.pending_raw
        return out

    def release(self, chunk: bytes) -> bytes:
        """While hiding: the bytes the client gets for `chunk` (its complete events but the
        usage-only one), found without decoding them; `observe_released` decodes them once
        they are on their way, so a chunk waits for no JSON parsing before it is sent."""
        if not self.holds_back or self._sse is None:
            return self.feed(chunk)
        self._received += len(chunk)
        held = self._sse.pending_raw
        try:
            events = self._sse.decode(chunk)
            out = self._visible(events)
        except Exception as exc:  # an observer bug must not break forwarding
            self._give_up(exc)
            return held + chunk
        self._released += events
        return out

    def observe_released(self) -> bytes:
        """Decode what `release` gave the client; bytes still held if observing failed (from
        then on bytes pass as they come)."""
        events, self._released = self._released, []
        if self._broken is not None or not events:
            return b""
        try:
            self._observe(events)
        except Exception as exc:
            self._give_up(exc)
            return self._sse.pending_raw if self._sse is not None else b""
        return b""

    def finish(self) -> bytes:
        """End of the provider's body; return any bytes still held back for the client."""
        self.observe_released()
        if self._broken is not None or self._sse is None:
            return b""
        try:
            events = self._sse.flush()
            self._observe(events)
            held = self._visible(events) if self._hide else b""
            return held + (self._sse.pending_raw if self._hide else b"")
        except Exception as exc:
            self._give_up(exc)
            return b""

    @property
    def assembler(self) -> Assembler:
        return self._assembler

    def completed_by(self, chunk: bytes) -> bool:
        """This chunk completes a body of known length."""
        length = self._length
        return self._sse is None and length is not None and self._received + len(chunk) == length

    def seen(self) -> Seen:
        """What was learned of the response; a whole body is decoded first if it was not."""
        self.observe_released()  # released to a client that went away before observing
        if self._status >= 400:
            return Seen.ERROR_STATUS
        if self._sse is None and self._broken is None:
            self._decode_body()
        seen = seen_by(self._assembler)
        return Seen.GAVE_UP if seen is Seen.PARTIAL and self._broken is not None else seen

    def error_fields(self) -> dict[str, Any]:
        """The provider's error object of an error-status response, or its first bytes."""
        error: dict[str, Any] | None = None
        body = self._parsed_body() if self._sse is None else None
        if body is not None:
            try:
                error = self._adapter.decode_error(body)
            except Exception as exc:
                self._give_up(exc)
        if error is None:
            text = bytes(self._body[:500]).decode("utf-8", "replace")
            error = {"message": text or f"HTTP {self._status}", "type": None, "code": None}
        return error

    def _observe(self, events: list[SSEEvent]) -> None:
        assert self._events is not None
        for event in events:
            for delta in self._events.decode(event):
                self._assembler.feed(delta)

    def _visible(self, events: list[SSEEvent]) -> bytes:
        injected = self._adapter.is_injected_usage_event
        if len(events) == 1:  # most chunks: one event, whose bytes are the chunk's
            return b"" if injected(events[0]) else events[0].raw
        return b"".join(e.raw for e in events if not injected(e))

    def _inflated(self, chunk: bytes) -> bytes:
        """Decompress at most what may still be parsed, over the whole body: a tiny chunk
        (or a long stream of them) must not explode."""
        inflate, room = self._inflate, MAX_PARSED_BODY - self._inflated_bytes
        assert inflate is not None
        data: bytes = inflate.decompress(chunk, room + 1)
        self._inflated_bytes += len(data)
        if self._inflated_bytes > MAX_PARSED_BODY or inflate.unconsumed_tail:
            self._inflate = None
            self._body.clear()
            self._broken = f"compressed body expands beyond {MAX_PARSED_BODY} bytes"
            return b""
        return data

    def _keep_body(self, data: bytes) -> None:
        if len(self._body) + len(data) > MAX_PARSED_BODY:
            self._broken = "body too large to parse"
            self._body.clear()
            return
        self._body += data

    def _parsed_body(self) -> Any:
        try:
            return jsoncodec.loads(self._body) if self._body else None
        except (ValueError, RecursionError):  # a hostile provider's deeply nested body
            return None

    def _decode_body(self) -> None:
        if self._decoded:
            return
        self._decoded = True
        body = self._parsed_body()
        if body is None:
            self._broken = "response body is not JSON"
            return
        try:
            for delta in self._adapter.decode_body(body):
                self._assembler.feed(delta)
        except Exception as exc:
            self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        log.warning("response tap stopped observing: %r", exc)
        self._broken = f"observer error: {exc!r}"[:200]
