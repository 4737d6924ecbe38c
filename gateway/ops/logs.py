"""Log lines, as text or as JSON (one object a line), and one access line per request.

An access line names the method, path, status, duration and the trace and step ids the
response carried; never bodies, query strings or headers, so no key reaches the log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any, ClassVar, Literal

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web import BaseRequest, StreamResponse

ACCESS_LOGGER = "loopwatch.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Paths are the client's: long ones are cut, so a flood of them cannot flood the log.
MAX_PATH_CHARS = 512
# Redacted paths remembered: a gateway sees few distinct ones (its routes), so each is
# redacted once; a flood of distinct paths only empties the memory now and then.
_PATHS_KEPT = 1024
# Libraries whose INFO lines are chatter to an operator (Alembic names each revision run).
_QUIET = ("alembic",)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the record's `fields`, error."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The gateway's own handler on stderr; access lines may bypass the logging machinery
    and be written here directly, in the same format, while it is the only one."""

    def __init__(self, json_lines: bool) -> None:
        super().__init__(sys.stderr)
        self.json_lines = json_lines
        self.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    """The root handler on stderr, in the chosen format; replaces any handler set before."""
    handler = LineHandler(log_format == "json")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


def _unchanged(text: str) -> str:
    return text


class AccessLogger(AbstractAccessLogger):
    """aiohttp's access-log hook: one INFO line on `loopwatch.access` per finished request.

    While the gateway's LineHandler is the only handler the line reaches, the line is built
    with one format string and written at once: no LogRecord, no dict, no formatter chain.
    Any other set-up (a test's capture, a library's handler) gets the line through logging.
    """

    __slots__ = ()
    # What a secret pasted into a path becomes; `access_logger_class` sets the gateway's.
    redact: ClassVar[Callable[[str], str]] = staticmethod(_unchanged)
    _paths: ClassVar[dict[str, str]] = {}

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        handler = _sole_line_handler(self.logger)
        if handler is None:
            self._log_record(request, response, time)
            return
        headers = response.headers
        line = access_line(
            handler.json_lines,
            request.method,
            self._path(request),
            response.status,
            round(time * 1000, 2),
            headers.get("X-Loopwatch-Trace-Id"),
            headers.get("X-Loopwatch-Step-Id"),
        )
        with handler.lock:  # type: ignore[union-attr]
            handler.stream.write(line)
            handler.stream.flush()

    def _path(self, request: BaseRequest) -> str:
        # The raw path, as sent: still percent-encoded, so it holds no newline or space to
        # forge a line with; the query string is left out (keys and tokens travel there).
        raw = request.rel_url.raw_path[:MAX_PATH_CHARS]
        paths = type(self)._paths
        path = paths.get(raw)
        if path is None:
            if len(paths) >= _PATHS_KEPT:
                paths.clear()
            path = paths[raw] = type(self).redact(raw)
        return path

    def _log_record(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        fields = access_fields(request, response, time, self._path)
        self.logger.info(
            "%s %s %s %.1fms trace=%s step=%s",
            fields["method"],
            fields["path"],
            fields["status"],
            fields["duration_ms"],
            fields["trace_id"] or "-",
            fields["step_id"] or "-",
            extra={"fields": fields},
        )


def _sole_line_handler(logger: logging.Logger) -> LineHandler | None:
    """The LineHandler every access line reaches, when it is the only handler they reach."""
    if logger.handlers or logger.filters or not logger.propagate:
        return None
    parent = logger.parent
    while parent is not None and not parent.handlers:
        if parent.filters or not parent.propagate:
            return None
        parent = parent.parent
    handlers = parent.handlers if parent is not None else ()
    if parent is None or parent.parent is not None or len(handlers) != 1 or parent.filters:
        return None
    handler = handlers[0]
    if type(handler) is not LineHandler or handler.filters or handler.level > logging.INFO:
        return None
    return handler


class _Clock:
    """The time prefix of a line, formatted once a second (as logging would format it)."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""
        self._iso = ""

    def now(self, json_lines: bool) -> str:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._iso = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        millis = int((now - second) * 1000)
        if json_lines:
            return f"{self._iso}.{millis:03d}+00:00"
        return f"{self._text},{millis:03d}"


_CLOCK = _Clock()
_JSON_HEAD = '{"time": "%s", "level": "info", "logger": "loopwatch.access", "message": '
_TEXT_HEAD = " INFO loopwatch.access: "


def access_line(
    json_lines: bool,
    method: str,
    path: str,
    status: int,
    duration_ms: float,
    trace_id: str | None,
    step_id: str | None,
) -> str:
    """One access line, byte for byte what the root handler's formatter makes of it."""
    ids = f"trace={trace_id or '-'} step={step_id or '-'}"
    message = f"{method} {path} {status} {duration_ms:.1f}ms {ids}"
    if not json_lines:
        return f"{_CLOCK.now(False)}{_TEXT_HEAD}{message}\n"
    quote = _quoted
    return (
        _JSON_HEAD
        % _CLOCK.now(True)
        + f'{quote(message)}, "method": {quote(method)}, "path": {quote(path)}, '
        f'"status": {status}, "duration_ms": {duration_ms!r}, '
        f'"trace_id": {quote(trace_id)}, "step_id": {quote(step_id)}}}\n'
    )


def _quoted(text: str | None) -> str:
    # What json.dumps(..., ensure_ascii=False) makes of a string, without building an encoder.
    return "null" if text is None else encode_basestring(text)


def access_fields(
    request: BaseRequest,
    response: StreamResponse,
    seconds: float,
    path_of: Callable[[BaseRequest], str],
) -> dict[str, Any]:
    return {
        "method": request.method,
        "path": path_of(request),
        "status": response.status,
        "duration_ms": round(seconds * 1000, 2),
        "trace_id": response.headers.get("X-Loopwatch-Trace-Id"),
        "step_id": response.headers.get("X-Loopwatch-Step-Id"),
    }


def access_logger_class(redact: Callable[[str], str]) -> type[AccessLogger]:
    """An AccessLogger redacting paths with `redact` (aiohttp takes a class, not an object)."""
    attributes = {"redact": staticmethod(redact), "_paths": {}}
    return type("ConfiguredAccessLogger", (AccessLogger,), attributes)
