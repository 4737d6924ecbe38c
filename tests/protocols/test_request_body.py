"""A body read once: the history's elements kept as the client's text and typed once each,
the same items as from the decoded body, and rewrites that leave the client's bytes alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway import jsoncodec
from gateway.errors import BadRequest
from gateway.protocols import request_body
from gateway.protocols.anthropic.messages import AnthropicMessagesAdapter
from gateway.protocols.openai_chat.completions import OpenAIChatAdapter
from gateway.protocols.openai_responses import OpenAIResponsesAdapter

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "forecast", "arguments": '{"city": "Lyon"}'},
}
HISTORIES: list[Any] = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None, "tool_calls": [CALL, {"function": {"name": "x"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "11 °C"},
        {"role": "critic", "content": "a role nobody knows"},
        "not a message",
        17,
    ],
    "messages that are a string",
    None,
    [],
]


@pytest.mark.parametrize("history", HISTORIES)
def test_items_from_the_text_equal_items_from_the_decoded_body(history: Any) -> None:
    raw = json.dumps({"model": "m", "messages": history, "stream": True}).encode()
    adapter = OpenAIChatAdapter()
    decoded = adapter.parse_request(json.loads(raw))
    for _ in range(2):  # the second time from what the first remembered
        read = adapter.parse_request(request_body.decode(raw, "messages"))
        assert read == decoded


ANTHROPIC_HISTORY: list[Any] = [
    {"role": "user", "content": "Weather in Lyon?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "never stored", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "forecast", "input": {"city": "Lyon"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "11 °C"}],
    },
    {"role": "system", "content": "A per-turn instruction."},
    {"role": "narrator", "content": "a role nobody knows"},
    {"role": "user", "content": 5},
    ["not", "a", "message"],
]


def test_anthropic_items_from_the_text_equal_items_from_the_decoded_body() -> None:
    body = {"model": "m", "max_tokens": 64, "system": "Be brief.", "messages": ANTHROPIC_HISTORY}
    raw = json.dumps(body).encode()
    adapter = AnthropicMessagesAdapter()
    decoded = adapter.parse_request(json.loads(raw))
    for _ in range(2):
        assert adapter.parse_request(request_body.decode(raw, "messages")) == decoded
    clamped = adapter.prepare_body(request_body.decode(raw, "messages"), decoded, max_tokens=8)
    assert json.loads(jsoncodec.dumps(clamped.body)) == {**body, "max_tokens": 8}


def test_what_the_decoder_refuses_is_read_as_before() -> None:
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
    body = request_body.decode(raw, "messages")
    assert body["messages"] == [{"role": "user", "content": "x"}]
    with pytest.raises(BadRequest, match="not valid JSON"):
        request_body.decode(b'{"messages": [', "messages")
    assert request_body.decode(b"[1, 2]", "messages") == [1, 2]


def test_a_rewritten_body_keeps_the_clients_text_of_every_message() -> None:
    message = b'{ "role" : "user",\n  "content": "caf\\u00e9 \\ud83d\\ude00" }'
    raw = b'{"model": "m", "stream": true, "messages": [' + message + b"]}"
    adapter = OpenAIChatAdapter()
    body = request_body.decode(raw, "messages")
    parsed = adapter.parse_request(body)
    assert parsed.items[0].text == "café 😀"
    prepared = adapter.prepare_body(body, parsed, max_tokens=50)
    sent = jsoncodec.dumps(prepared.body)
    assert message in sent
    assert json.loads(sent) == {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "café 😀"}],
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 50,
    }


def test_what_is_remembered_is_bounded() -> None:
    remembered = request_body.Remembered(budget=900, max_chars=40)  # two short entries
    made: list[Any] = []

    def make(value: Any) -> tuple[Any, ...]:
        made.append(value)
        return (value,)

    raws = [request_body.decode(b'{"h": [%d]}' % n, "h")["h"][0] for n in range(3)]
    for raw in (*raws, raws[2]):
        remembered.get(0, raw, make)
    assert made == [0, 1, 2]  # the last one was remembered
    remembered.get(0, raws[0], make)
    assert made == [0, 1, 2, 0]  # the first one was not any more
    long = request_body.decode(b'{"h": ["' + b"x" * 50 + b'"]}', "h")["h"][0]
    remembered.get(0, long, make)
    remembered.get(0, long, make)
    assert made[-2:] == ["x" * 50, "x" * 50]  # too long to keep


ADAPTERS = [OpenAIChatAdapter, OpenAIResponsesAdapter, AnthropicMessagesAdapter]


def _read(adapter_class: type[Any], raw: bytes) -> Any:
    adapter = adapter_class()
    return adapter.parse_request(request_body.decode(raw, adapter.history_field))


@pytest.mark.parametrize("adapter_class", ADAPTERS)
@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}', "utf-8"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "\xed\xa0\x80"}]}', "utf-8"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', "surrogate"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "\\udc00 x"}]}', "surrogate"),
        (b'{"model": "\\ud800", "messages": []}', "surrogate"),
        (b'{"model": "m\xc3", "messages": []}', "utf-8"),
        (b'{"model": "m", "messages": [' + b"[" * 5000 + b"]" * 5000 + b"]}", "nested"),
        ('{"model": "m", "messages": []}'.encode("utf-16"), "utf-8"),  # JSON is UTF-8 only
    ],
)
def test_what_no_reader_reads_is_our_bad_request(
    adapter_class: type[Any], raw: bytes, reason: str
) -> None:
    """In a history element too, which is read only when it is typed: never a DecodeError."""
    with pytest.raises(BadRequest, match=reason):
        _read(adapter_class, raw)


@pytest.mark.parametrize("adapter_class", ADAPTERS)
@pytest.mark.parametrize(
    "value",
    [b"1e999", b"NaN", b"-Infinity", b"123456789012345678901234567890", b'"\\ud83d\\ude00"'],
)
def test_what_json_allows_is_read_in_a_history_element(
    adapter_class: type[Any], value: bytes
) -> None:
    raw = b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "x": '
    parsed = _read(adapter_class, raw + value + b'}]}], "input": [' + value + b"]}")
    assert parsed.model == "m"
