"""The response tap: observing never changes or breaks what the client gets."""

from __future__ import annotations

import gzip
import json
import zlib

from gateway.items import StopReason
from gateway.protocols.openai_chat import ADAPTER
from gateway.tap import MAX_PARSED_BODY, ResponseTap

BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def test_gzip_body_is_observed_when_its_last_byte_arrives() -> None:
    raw = gzip.compress(json.dumps(BODY).encode())
    tap = ResponseTap(
        ADAPTER, status=200, is_sse=False, content_encoding="gzip", content_length=len(raw)
    )
    assert tap.feed(raw[:10]) == raw[:10]
    assert not tap.ended
    assert tap.feed(raw[10:]) == raw[10:]
    assert tap.ended and tap.usage.total_tokens == 4
    assert tap.result().output_items[0].text == "hi"


def test_compression_bomb_stops_observing_not_forwarding() -> None:
    bomb = zlib.compressobj(wbits=31)
    raw = bomb.compress(b"\x00" * (MAX_PARSED_BODY + 1024 * 1024)) + bomb.flush()
    assert len(raw) < 1024 * 1024  # a small chunk that would expand past the parse limit
    tap = ResponseTap(ADAPTER, status=200, is_sse=False, content_encoding="gzip")
    assert tap.feed(raw) == raw  # the client still gets every byte
    assert tap.broken is not None
    assert tap.result().stop_reason is StopReason.UNKNOWN
