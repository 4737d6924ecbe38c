"""The frame tap: reads a socket response's events, one parsed event a frame, beside the
frames the client gets. It lives under the exchange, which decides what its readings mean,
and never raises: a failure stops observing, never forwarding (STYLE rule 12).
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.exchange.stops import Seen, seen_by
from gateway.items import Usage
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.frames import FrameDecoder, ServerFrame
from gateway.stream.assembler import Assembler, State

log = logging.getLogger(__name__)


class FrameTap:
    """One response's frames. `status` is the response's as its first frame gave it: an
    error event in place of the response carries the HTTP status of the refusal."""

    def __init__(self, adapter: ProtocolAdapter, decoder: FrameDecoder, status: int) -> None:
        self._adapter = adapter
        self._decoder = decoder
        self._status = status
        self._assembler = Assembler()
        self._refusal: dict[str, Any] | None = None  # the error event of a refused request
        self._broken: str | None = None

    @property
    def ended(self) -> bool:
        """The protocol's completion marker has arrived (usage is then final)."""
        return self._assembler.state is State.ENDED

    @property
    def usage(self) -> Usage:
        return self._assembler.usage

    @property
    def assembler(self) -> Assembler:
        return self._assembler

    def observe(self, frame: ServerFrame) -> None:
        if self._status >= 400:
            self._refusal = self._refusal or frame.data
            return
        if self._broken is not None:
            return
        try:
            for delta in self._decoder.decode_data(frame.data):
                self._assembler.feed(delta)
        except Exception as exc:  # an observer bug must not break forwarding
            log.warning("frame tap stopped observing: %r", exc)
            self._broken = f"observer error: {exc!r}"[:200]

    def seen(self) -> Seen:
        if self._status >= 400:
            return Seen.ERROR_STATUS
        seen = seen_by(self._assembler)
        return Seen.GAVE_UP if seen is Seen.PARTIAL and self._broken is not None else seen

    def error_fields(self) -> dict[str, Any]:
        """The provider's error object of a refused request."""
        error = None
        try:
            error = self._adapter.decode_error(self._refusal)
        except Exception as exc:
            log.warning("frame tap could not read an error event: %r", exc)
        return error or {"message": f"HTTP {self._status}", "type": None, "code": None}
