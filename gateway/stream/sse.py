"""Incremental Server-Sent Events decoder: bytes in any split → complete events.

Each event keeps the exact bytes it came from, so the proxy can forward event-aligned bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

# A hostile or broken upstream must not make us buffer without bound.
MAX_EVENT_BYTES = 8 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. `raw` is the exact bytes it came from (comments included).

    `oversized` marks a piece of an event larger than the decoder's limit: its data was
    dropped and one such event may arrive in several pieces, whose `raw` still concatenate
    to the bytes received.
    """

    event: str | None
    data: str
    id: str | None = None
    raw: bytes = b""
    oversized: bool = False


class SSEDecoder:
    """Feed chunks split anywhere; get events once their blank line arrives.

    Lines may end in LF, CRLF or CR. Blocks without data (comments, keep-alives) are not
    dispatched unless `dispatch_empty`: their bytes become part of the next event's `raw`.
    Concatenating every event's `raw`, then `pending_raw` after `flush()`, reproduces the
    input exactly.
    """

    __slots__ = (
        "_buf",
        "_data",
        "_dispatch_empty",
        "_emitted",
        "_event",
        "_id",
        "_line",
        "_max",
        "_midline",
        "_oversized",
        "_scan",
        "_started",
    )

    def __init__(
        self, *, max_event_bytes: int = MAX_EVENT_BYTES, dispatch_empty: bool = False
    ) -> None:
        self._max = max_event_bytes
        # Opt-in: hand out data-less blocks (keep-alive comments) as events with data "",
        # so a proxy releasing bytes per event does not hold keep-alives back.
        self._dispatch_empty = dispatch_empty
        self._buf = bytearray()  # bytes of the current event not yet handed out
        self._line = 0  # start of the first unparsed line in _buf
        self._scan = 0  # _buf[_line:_scan] is known to hold no line terminator
        self._emitted = 0  # bytes of the current event already handed out (oversized)
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self._oversized = False
        self._midline = False  # the current line's start was handed out (oversized)
        self._started = False  # the first line (which may carry a BOM) was parsed

    @property
    def pending_raw(self) -> bytes:
        """Bytes received that belong to no returned event yet."""
        return bytes(self._buf)

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if not self._buf and self._started and chunk.endswith(b"\n\n"):
            found = self._whole_events(chunk)
            if found is not None:
                return found
        if chunk:
            self._buf += chunk
        out: list[SSEEvent] = []
        self._parse(out, final=False)
        return out

    def _whole_events(self, chunk: bytes) -> list[SSEEvent] | None:
        """Most chunks of an LLM stream: whole events of one `data:` line each, LF-ended,
        none pending before them. None for anything else (the general parser reads it)."""
        if b"\r" in chunk or len(chunk) > self._max or self._oversized or self._midline:
            return None
        if self._data or self._event is not None or self._id is not None:
            return None
        blocks = chunk.split(b"\n\n")
        if blocks.pop():  # more than the empty text after the last blank line
            return None
        out = []
        for block in blocks:
            if not block.startswith(b"data:") or b"\n" in block:
                return None
            value = block[6:] if block[5:6] == b" " else block[5:]
            raw = chunk if len(blocks) == 1 else block + b"\n\n"
            out.append(SSEEvent(None, value.decode("utf-8", "replace"), None, raw))
        return out

    def flush(self) -> list[SSEEvent]:
        """End of stream: an unterminated event with data is returned as an event.

        Bytes that form no event (a trailing comment, a partial field without data) stay
        in `pending_raw`.
        """
        out: list[SSEEvent] = []
        self._parse(out, final=True)
        buf = self._buf
        if self._oversized:
            if buf:
                out.append(self._piece(len(buf)))
        else:
            if self._line < len(buf) and not self._midline:
                self._field(self._line, len(buf))
            if self._data:
                out.append(self._make_event(bytes(buf)))
                buf.clear()
        self._reset_event()
        self._line = self._scan = 0
        return out

    def _parse(self, out: list[SSEEvent], *, final: bool) -> None:
        buf = self._buf
        n = len(buf)
        line, scan, start = self._line, self._scan, 0
        while True:
            lf = buf.find(b"\n", scan)
            cr = buf.find(b"\r", scan, n if lf < 0 else lf)
            if cr >= 0:
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if buf[cr + 1] == 0x0A else cr + 1
                elif final:
                    nxt = cr + 1
                else:
                    scan = cr  # wait: the next chunk may begin with the LF of a CRLF
                    break
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                scan = n
                break
            if end == line and not self._midline:
                start = self._dispatch(out, start, nxt)
            elif not self._oversized:
                self._field(line, end)
            self._midline = False
            line = scan = nxt
        if not self._oversized and self._emitted + n - start > self._max:
            self._oversized = True
            self._data = []
        if self._oversized and scan > start:
            # Hand out what we hold so that memory stays bounded, even mid-line.
            out.append(self._piece(scan, start))
            if scan > line:
                self._midline = True
                line = scan
            start = scan
        if start:
            del buf[:start]
        self._line, self._scan = line - start, scan - start

    def _dispatch(self, out: list[SSEEvent], start: int, nxt: int) -> int:
        """A blank line ends a block; returns where the next event's raw begins."""
        if self._oversized:
            out.append(self._piece(nxt, start))
            self._emitted = 0
            self._oversized = False
        elif self._data:
            if self._emitted + nxt - start > self._max:
                out.append(self._piece(nxt, start))
            else:
                out.append(self._make_event(bytes(self._buf[start:nxt])))
        elif self._dispatch_empty:
            out.append(SSEEvent(self._event, "", self._id, bytes(self._buf[start:nxt])))
        else:
            # No data: per the SSE spec nothing is dispatched; the bytes ride with the next event.
            self._event = self._id = None
            return start
        self._reset_event()
        return nxt

    def _piece(self, stop: int, start: int = 0) -> SSEEvent:
        self._emitted += stop - start
        return SSEEvent(self._event, "", None, bytes(self._buf[start:stop]), oversized=True)

    def _make_event(self, raw: bytes) -> SSEEvent:
        return SSEEvent(self._event, "\n".join(self._data), self._id, raw)

    def _reset_event(self) -> None:
        self._event = self._id = None
        self._data = []
        self._emitted = 0
        self._oversized = False
        self._midline = False

    def _field(self, line: int, end: int) -> None:
        buf = self._buf
        if not self._started:
            self._started = True
            if buf.startswith(_BOM, line):
                line += 3
        # Hot path: nearly every line of an LLM stream is a data line.
        if buf.startswith(b"data:", line):
            value_at = line + 5
            if value_at < end and buf[value_at] == 0x20:
                value_at += 1
            self._data.append(buf[value_at:end].decode("utf-8", "replace"))
            return
        if line == end or buf[line] == 0x3A:  # ":" opens a comment
            return
        colon = buf.find(b":", line, end)
        if colon < 0:
            self._set(bytes(buf[line:end]), "")
            return
        value_at = colon + 1
        if value_at < end and buf[value_at] == 0x20:
            value_at += 1
        self._set(bytes(buf[line:colon]), buf[value_at:end].decode("utf-8", "replace"))

    def _set(self, name: bytes, value: str) -> None:
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id" and "\x00" not in value:  # the spec ignores ids containing NUL
            self._id = value
        # "retry" and unknown fields are ignored, as the spec says.
