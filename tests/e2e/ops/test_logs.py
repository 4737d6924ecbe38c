"""Logs: JSON lines when asked, and one access line per request that never holds a key."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, Literal

import aiohttp
import openai
import pytest

from gateway.ops.logs import ACCESS_LOGGER, JsonFormatter, access_line, configure_logging
from tests import harness
from tests.fakes.chat import completion, streamed
from tests.fakes.provider import FakeProvider, Reply
from tests.processes import serving

provider = harness.provider
SECRET = "sk-proj-Zq8mW3xT5vR7nB2kL9pD4fH6jC1sA0eY"


async def _traffic(url: str, fake: FakeProvider) -> set[tuple[str, str]]:
    """50 requests of every kind, each carrying the key; returns the (trace, step) ids seen."""
    ids: set[tuple[str, str]] = set()
    fake.queue(*[completion(f"answer {n}") for n in range(30)])
    fake.queue(*[streamed(f"stream {n}") for n in range(10)])
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key=SECRET, max_retries=0) as sdk:
        for n in range(40):
            messages: Any = [{"role": "user", "content": f"question {n}"}]
            raw = await sdk.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=messages, stream=n >= 30
            )
            parsed: Any = raw.parse()
            if n >= 30:
                assert [chunk async for chunk in parsed]
            ids.add((raw.headers["X-Loopwatch-Trace-Id"], raw.headers["X-Loopwatch-Step-Id"]))
    fake.queue(*[Reply(body={"object": "list", "data": []}) for _ in range(7)])
    auth = {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET}
    async with aiohttp.ClientSession(headers=auth) as session:
        for path in [f"/v1/models?api_key={SECRET}"] * 5 + [f"/v1/files/{SECRET}"] * 2:
            async with session.get(url + path) as response:
                assert response.status == 200
                ids.add(
                    (
                        response.headers["X-Loopwatch-Trace-Id"],
                        response.headers["X-Loopwatch-Step-Id"],
                    )
                )
        for path in [f"/healthz?token={SECRET}", "/metrics", "/api/traces?limit=2"]:
            async with session.get(url + path) as response:
                assert response.status == 200
    return ids


async def test_fifty_requests_give_fifty_json_access_lines_without_the_key(
    provider: FakeProvider, tmp_path: Any
) -> None:
    async with serving(
        LOOPWATCH_LOG_FORMAT="json",
        LOOPWATCH_UPSTREAM_URL=provider.url,  # type: ignore[attr-defined]
        LOOPWATCH_DATABASE_URL=f"sqlite:///{tmp_path}/lw.db",
    ) as served:
        ids = await _traffic(served.url, provider)
    entries = [json.loads(line) for line in served.lines()]  # every line is one JSON object
    access = [e for e in entries if e["logger"] == "loopwatch.access"]
    assert len(access) == 50
    assert SECRET not in "\n".join(served.lines())
    assert {(e["trace_id"], e["step_id"]) for e in access if e["trace_id"]} == ids
    for entry in access:
        assert set(entry) == {
            *("time", "level", "logger", "message", "method", "path", "status"),
            *("duration_ms", "trace_id", "step_id"),
        }
        assert entry["status"] == 200 and entry["duration_ms"] >= 0
        assert "?" not in entry["path"], "query strings are never logged"
    paths = {e["path"] for e in access}
    assert paths == {
        *("/v1/chat/completions", "/v1/models", "/v1/files/[REDACTED:api_key]"),
        *("/healthz", "/metrics", "/api/traces"),
    }


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger as the test found it, restored afterwards (pytest hangs its own on it)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_json_format_keeps_a_traceback_inside_one_line(
    root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", "json")
    assert isinstance(root_logger.handlers[0].formatter, JsonFormatter)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logging.getLogger("gateway.test").exception("it broke: %s", "here")
    logging.getLogger("gateway.test").debug("below the level")
    [line] = capsys.readouterr().err.splitlines()
    entry = json.loads(line)
    assert entry["level"] == "error" and entry["message"] == "it broke: here"
    assert "ValueError: bad" in entry["error"] and entry["logger"] == "gateway.test"


def test_text_format_is_the_default(
    root_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("warning", "text")
    logging.getLogger("gateway.test").warning("plain %d", 1)
    logging.getLogger("alembic.runtime.migration").info("Running upgrade")
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" WARNING gateway.test: plain 1")


@pytest.mark.parametrize("log_format", ["text", "json"])
@pytest.mark.parametrize(
    ("path", "trace_id", "step_id"),
    [
        ("/v1/chat/completions", "tr_1", "st_1"),
        ('/v1/files/a"b\\c%20é', None, None),
    ],
)
def test_a_written_access_line_is_the_line_logging_makes(
    root_logger: logging.Logger,
    capsys: pytest.CaptureFixture[str],
    log_format: Literal["text", "json"],
    path: str,
    trace_id: str | None,
    step_id: str | None,
) -> None:
    """The line written without a LogRecord equals, but for its time, the formatter's."""
    configure_logging("info", log_format)
    fields = {
        "method": "POST",
        "path": path,
        "status": 201,
        "duration_ms": 12.35,
        "trace_id": trace_id,
        "step_id": step_id,
    }
    message = f"POST {path} 201 12.3ms trace={trace_id or '-'} step={step_id or '-'}"
    logging.getLogger(ACCESS_LOGGER).info(message, extra={"fields": fields})
    logged = capsys.readouterr().err
    written = access_line(log_format == "json", *fields.values())  # type: ignore[arg-type]
    if log_format == "json":
        first, second = json.loads(logged), json.loads(written)
        assert first.pop("time")[:16] == second.pop("time")[:16]
        assert list(first.items()) == list(second.items())
        assert logged.split('"level"', 1)[1] == written.split('"level"', 1)[1]
    else:
        assert logged.split(" ", 2)[2] == written.split(" ", 2)[2]
        assert logged[:16] == written[:16] and written.endswith("\n")
