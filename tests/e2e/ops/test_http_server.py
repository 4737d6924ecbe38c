"""Requests aiohttp's parser refuses get a JSON error in OpenAI's format and one log line."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from gateway.config import Settings
from gateway.ops.serving import running

KEY = "sk-proj-Qm7xV2bN9cL4kJ8hG3fD6sA1pZ0wE5rT"


async def _exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the whole answer (the server closes after a refusal)."""
    target = URL(url)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    settings = Settings(port=0, database_url=f"sqlite:///{tmp_path}/lw.db")
    async with running(settings) as urls:
        yield urls[0]


def _our_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("loopwatch", "aiohttp", "gateway"))]


@pytest.mark.parametrize("header", ["X-Padding", "Authorization"])
async def test_a_100_kb_header_is_a_json_431_and_one_log_line(
    served: str, caplog: pytest.LogCaptureFixture, header: str
) -> None:
    value = f"Bearer {KEY}" + "x" * 100_000
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: lw\r\n{header}: {value}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    ).encode()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        status, headers, body = await _exchange(served, request)
    assert status == 431
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "request_header_too_large"
    assert error["param"] is None and "8190 bytes" in error["message"]
    [line] = _our_lines(caplog)
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert "over 8190 bytes" in line.getMessage() and KEY not in caplog.text
    assert "Bearer" not in caplog.text


async def test_a_malformed_request_is_a_json_400(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    with caplog.at_level(logging.INFO):
        status, _, body = await _exchange(
            served, f"GET /healthz HTTP/1.1\r\nHost: lw\r\nNo colon {KEY}\r\n\r\n".encode()
        )
    assert status == 400
    assert json.loads(body)["error"]["code"] == "malformed_request"
    [line] = _our_lines(caplog)
    assert line.exc_info is None and KEY not in caplog.text


async def test_too_many_headers_is_a_431(served: str) -> None:
    headers = "".join(f"X-H{n}: {n}\r\n" for n in range(200))
    status, _, body = await _exchange(served, f"GET /healthz HTTP/1.1\r\n{headers}\r\n".encode())
    assert status == 431
    assert json.loads(body)["error"]["code"] == "request_header_too_large"


async def test_ordinary_requests_still_get_one_access_line(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        status, _, body = await _exchange(
            served, b"GET /healthz HTTP/1.1\r\nHost: lw\r\nConnection: close\r\n\r\n"
        )
    assert status == 200 and json.loads(body)["status"] == "ok"
    [line] = [r for r in caplog.records if r.name == "loopwatch.access"]
    assert line.getMessage().startswith("GET /healthz 200 ")
