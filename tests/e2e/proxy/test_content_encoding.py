"""Content-Encoding both ways through the real gateway: the client's bytes always match its
headers, whatever the provider compresses; inflation (of requests and of the observed copy of
responses) is bounded; codings the gateway cannot read are refused or passed untouched."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import aiohttp
import openai
import pytest

from gateway.exchange.tap import MAX_PARSED_BODY
from tests.factories import chat_request
from tests.fakes.chat import completion, streamed, usage
from tests.fakes.provider import Reply
from tests.harness import Gateway, gateway, make_gateway, provider  # noqa: F401

pytestmark = pytest.mark.sqlite

HELLO = chat_request("Hi")


def sdk(gw: Gateway) -> openai.AsyncOpenAI:
    return gw.closing(
        openai.AsyncOpenAI(base_url=gw.openai_base, api_key="sk-test-enc123", max_retries=0)
    )


async def only_step(gw: Gateway) -> dict[str, Any]:
    steps: list[dict[str, Any]] = (await gw.trace((await gw.traces())[0]["id"]))["steps"]
    assert len(steps) == 1
    return steps[0]


async def post_raw(
    gw: Gateway, path: str, data: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """A request with a body exactly as given; the response's bytes exactly as they arrive."""
    async with (
        aiohttp.ClientSession(auto_decompress=False) as s,
        s.post(gw.url + path, data=data, headers=headers) as r,
    ):
        return r.status, dict(r.headers), await r.read()


def bomb(size: int) -> bytes:
    """`size` zero bytes, gzipped: a small body that inflates past any sane bound."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1024 * 1024)
    return b"".join(packer.compress(block) for _ in range(size // len(block))) + packer.flush()


# Responses


async def test_gzip_stream_while_hiding_usage_reaches_the_sdk_intact(gateway: Gateway) -> None:
    reply = streamed("Hello there.", use=usage(7, 3))
    reply.gzip = True  # although the gateway asks for identity
    gateway.provider.queue(reply)
    stream = await sdk(gateway).chat.completions.create(model="gpt-4o", messages=[], stream=True)
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there."
    # Encoded bytes are never rewritten: the usage event passes as the provider sent it.
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 10
    sent = gateway.provider.received[0]
    assert sent.headers["Accept-Encoding"] == "identity"
    assert sent.json()["stream_options"] == {"include_usage": True}
    step = await only_step(gateway)
    assert step["stop_reason"] == "completed"
    assert step["usage"]["total_tokens"] == 10
    assert step["output_items"][0]["text"] == "Hello there."


async def test_gzip_stream_bytes_match_the_headers_the_client_gets(gateway: Gateway) -> None:
    reply = streamed("Hello there.", use=usage(7, 3))
    reply.gzip = True
    plain = b"".join(reply.events or [])
    gateway.provider.queue(reply)
    body = json.dumps({**HELLO, "stream": True}).encode()
    status, headers, raw = await post_raw(
        gateway, "/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(raw) == plain  # every event, the usage one too, unchanged


async def test_gzip_bomb_stream_passes_as_sent_and_is_recorded_unknown(gateway: Gateway) -> None:
    payload = bomb(MAX_PARSED_BODY + 8 * 1024 * 1024)
    # Small pieces: each inflates within bounds, the stream as a whole does not.
    pieces = [payload[i : i + 4096] for i in range(0, len(payload), 4096)]
    # Paused, so they arrive as separate chunks rather than merged in the socket's buffer.
    gateway.provider.queue(Reply(events=pieces, headers={"Content-Encoding": "gzip"}, pause=0.01))
    body = json.dumps({**HELLO, "stream": True}).encode()
    status, headers, raw = await post_raw(
        gateway, "/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert raw == payload  # the provider's bytes, not an inflated or mixed form
    step = await only_step(gateway)
    assert step["stop_reason"] == "unknown" and step["output_items"] == []


async def test_gzip_bomb_body_passes_as_sent_and_is_recorded_unknown(gateway: Gateway) -> None:
    payload = bomb(MAX_PARSED_BODY + 8 * 1024 * 1024)
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    gateway.provider.queue(Reply(raw=payload, headers=headers))
    status, got, raw = await post_raw(
        gateway, "/v1/chat/completions", json.dumps(HELLO).encode(), {}
    )
    assert status == 200 and got["Content-Encoding"] == "gzip"
    assert got["Content-Length"] == str(len(payload)) and raw == payload
    step = await only_step(gateway)
    assert step["stop_reason"] == "unknown" and step["http_status"] == 200


async def test_gzip_json_body_is_read_by_the_sdk_and_recorded(gateway: Gateway) -> None:
    reply = completion("compressed answer", use=usage(5, 4))
    reply.gzip = True
    gateway.provider.queue(reply)
    result = await sdk(gateway).chat.completions.create(model="gpt-4o", messages=[])
    assert result.choices[0].message.content == "compressed answer"
    step = await only_step(gateway)
    assert step["usage"]["total_tokens"] == 9 and step["stop_reason"] == "completed"


async def test_unknown_response_coding_passes_untouched_recorded_unknown(gateway: Gateway) -> None:
    payload = b"\x1b\x0e\x00\xf8brotli-ish bytes"
    headers = {"Content-Encoding": "br", "Content-Type": "application/json"}
    gateway.provider.queue(Reply(raw=payload, headers=headers))
    status, got, raw = await post_raw(
        gateway, "/v1/chat/completions", json.dumps(HELLO).encode(), {}
    )
    assert (status, got["Content-Encoding"], raw) == (200, "br", payload)
    assert (await only_step(gateway))["stop_reason"] == "unknown"


# Requests


async def test_gzip_request_body_is_parsed_recorded_and_forwarded_decoded(
    gateway: Gateway,
) -> None:
    gateway.provider.queue(completion("hi back"))
    body = json.dumps(chat_request("zipped hi"))
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    status, _, raw = await post_raw(
        gateway, "/v1/chat/completions", gzip.compress(body.encode()), headers
    )
    assert status == 200, raw
    sent = gateway.provider.received[0]
    assert "content-encoding" not in {name.lower() for name in sent.headers}
    assert sent.json()["messages"][0]["content"] == "zipped hi"
    step = await only_step(gateway)
    assert step["input_items"][0]["text"] == "zipped hi"
    assert step["output_items"][0]["text"] == "hi back"


async def test_deflate_request_body_is_parsed(gateway: Gateway) -> None:
    gateway.provider.queue(completion("ok"))
    headers = {"Content-Encoding": "deflate", "Content-Type": "application/json"}
    data = zlib.compress(json.dumps(HELLO).encode())
    status, _, raw = await post_raw(gateway, "/v1/chat/completions", data, headers)
    assert status == 200, raw
    assert gateway.provider.received[0].json()["messages"] == HELLO["messages"]


async def test_request_bomb_gets_413_and_reaches_nobody(make_gateway: Any) -> None:
    gw = await make_gateway(max_body_bytes=1024 * 1024)
    body = json.dumps({**HELLO, "pad": "a" * (4 * 1024 * 1024)}).encode()
    data = gzip.compress(body)
    assert len(data) < 64 * 1024  # the compressed body itself is well within the limit
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    status, _, raw = await post_raw(gw, "/v1/chat/completions", data, headers)
    assert status == 413
    assert json.loads(raw)["error"]["code"] == "request_too_large"
    assert gw.provider.received == []


async def test_corrupt_gzip_request_gets_400(gateway: Gateway) -> None:
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    status, _, raw = await post_raw(gateway, "/v1/chat/completions", b"not gzip at all", headers)
    assert status == 400 and "not valid gzip" in json.loads(raw)["error"]["message"]
    assert gateway.provider.received == []


async def test_brotli_request_gets_415_in_the_clients_protocol(gateway: Gateway) -> None:
    headers = {"Content-Encoding": "br", "Content-Type": "application/json"}
    status, _, raw = await post_raw(gateway, "/v1/chat/completions", b"\x1b\x00", headers)
    error = json.loads(raw)["error"]
    assert status == 415 and error["code"] == "unsupported_content_encoding"
    assert "'br'" in error["message"] and "gzip" in error["message"]
    status, _, raw = await post_raw(gateway, "/v1/messages", b"\x1b\x00", {**headers})
    assert status == 415 and json.loads(raw)["type"] == "error"  # Anthropic's error shape
    assert "unsupported_content_encoding" in json.loads(raw)["error"]["message"]
    assert gateway.provider.received == []
