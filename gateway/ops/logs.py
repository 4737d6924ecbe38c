"""Log lines, as text or as JSON (one object a line), and one access line per request.

An access line names the method, path, status, duration and the trace and step ids the
response carried; never bodies, query strings or headers, so no key reaches the log.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from aiohttp.abc import AbstractAccessLogger
from aiohttp.web import BaseRequest, StreamResponse

ACCESS_LOGGER = "loopwatch.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Paths are the client's: long ones are cut, so a flood of them cannot flood the log.
MAX_PATH_CHARS = 512
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


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    """The root handler on stderr, in the chosen format; replaces any handler set before."""
    handler = logging.StreamHandler(sys.stderr)
    json_lines = log_format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
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
    """aiohttp's access-log hook: one INFO line on `loopwatch.access` per finished request."""

    __slots__ = ()
    # What a secret pasted into a path becomes; `access_logger_class` sets the gateway's.
    redact: ClassVar[Callable[[str], str]] = staticmethod(_unchanged)

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        fields = access_fields(request, response, time, type(self).redact)
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


def access_fields(
    request: BaseRequest, response: StreamResponse, seconds: float, redact: Callable[[str], str]
) -> dict[str, Any]:
    # The raw path, as sent: still percent-encoded, so it holds no newline or space to forge
    # a line with; the query string is left out (keys and tokens travel there).
    path = request.rel_url.raw_path[:MAX_PATH_CHARS]
    return {
        "method": request.method,
        "path": redact(path),
        "status": response.status,
        "duration_ms": round(seconds * 1000, 2),
        "trace_id": response.headers.get("X-Loopwatch-Trace-Id"),
        "step_id": response.headers.get("X-Loopwatch-Step-Id"),
    }


def access_logger_class(redact: Callable[[str], str]) -> type[AccessLogger]:
    """An AccessLogger redacting paths with `redact` (aiohttp takes a class, not an object)."""
    return type("ConfiguredAccessLogger", (AccessLogger,), {"redact": staticmethod(redact)})
