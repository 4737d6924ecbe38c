"""Opaque payloads a provider wants back, as each adapter records them: with
`keep_opaque_reasoning` on their reasoning item (`attrs["opaque"]`, by wire field), off never;
from requests' histories, streams and JSON answers alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.items import Item, ItemKind
from gateway.opaque import Digests
from gateway.protocols.registry import ADAPTERS, keyed
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.stream.assembler import Assembler
from gateway.stream.deltas import Delta
from gateway.stream.sse import SSEDecoder
from tests.factories import load_fixture, output_of

FIXTURES = Path(__file__).parent.parent / "fixtures"
KEEPING = Digests(b"install secret", keep=True)
NOT_KEEPING = Digests(b"install secret")
SIGNATURE = "EroCCmUIDhgCKkCLWMARK-7f3a9cNWw0dWjXDUtFhxyU7T1jL1I74woU7bJADq7xTdoI1tp=="
REDACTED = "EqkECkYIBxgCKkA8AZ4noDfV5VcOJeLWMARK-7f3a9cp3JTRB6Xz5297mrWhl3MbHSXDKTMfu=="
ENCRYPTED = (
    "gAAAAABpZLWMARKER-7f3a9c-raw-chain-of-thoughtXq9tVvR2k8Yw3n_bPz0cJ4LmQe7uHs1dFa6gKiT5oWxyEr"
)


def streamed(protocol: str, name: str, digests: Digests) -> list[Item]:
    decoder = ADAPTERS[protocol].keyed(digests).new_event_decoder()
    sse = SSEDecoder()
    events = sse.decode((FIXTURES / protocol / name).read_bytes()) + sse.flush()
    return assembled([d for event in events for d in decoder.decode(event)])


def answered(protocol: str, body: Any, digests: Digests) -> list[Item]:
    return assembled(ADAPTERS[protocol].keyed(digests).decode_body(body))


def assembled(deltas: list[Delta]) -> list[Item]:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler).output_items


def kept(items: list[Item]) -> list[Any]:
    return [i.attrs[OPAQUE] for i in items if OPAQUE in i.attrs]


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("stream_thinking_text_tool_use.sse", {"signature": SIGNATURE}),
        ("stream_redacted_thinking.sse", {"data": REDACTED}),
    ],
)
def test_a_thinking_stream_keeps_its_payload_on_the_reasoning_item(
    name: str, payload: dict[str, str]
) -> None:
    items = streamed("messages", name, KEEPING)
    assert kept(items) == [payload]
    assert items[0].kind is ItemKind.REASONING and items[0].text is None
    assert kept(streamed("messages", name, NOT_KEEPING)) == []
    # The digests a later request is checked by are the same either way.
    digests = streamed("messages", name, NOT_KEEPING)[0].attrs["digests"]
    assert items[0].attrs["digests"] == digests


def test_a_signature_signs_text_that_is_never_stored() -> None:
    [reasoning, *_] = streamed("messages", "stream_thinking_text_tool_use.sse", KEEPING)
    assert reasoning.attrs["signed_text"] is True
    [redacted, *_] = streamed("messages", "stream_redacted_thinking.sse", KEEPING)
    assert "signed_text" not in redacted.attrs  # its data is the whole of it


def test_a_messages_history_keeps_signatures_and_redacted_data() -> None:
    body = json.loads((FIXTURES / "messages" / "nonstream_tool_result_roundtrip.json").read_text())
    request = body["request"]["body"]
    adapter = ADAPTERS["messages"]
    parsed = adapter.keyed(KEEPING).parse_request(request)
    reasoning = [i for i in parsed.items if i.kind is ItemKind.REASONING]
    blocks = [
        b
        for m in request["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] in ("thinking", "redacted_thinking")
    ]
    expected = [
        {"signature": b["signature"]} if b["type"] == "thinking" else {"data": b["data"]}
        for b in blocks
    ]
    assert kept(reasoning) == expected and len(expected) == 2
    assert kept(adapter.keyed(NOT_KEEPING).parse_request(request).items) == []
    assert kept(adapter.parse_request(request).items) == []  # unkeyed: never


def test_a_messages_answer_keeps_its_signature() -> None:
    fixture = load_fixture("messages", "nonstream_tool_result_roundtrip.json")
    blocks = [{"type": "thinking", "thinking": "hidden", "signature": SIGNATURE}]
    body = {**fixture["response"], "content": blocks}
    assert kept(answered("messages", body, KEEPING)) == [{"signature": SIGNATURE}]
    assert kept(answered("messages", body, NOT_KEEPING)) == []


def test_responses_keep_encrypted_content_from_streams_answers_and_histories() -> None:
    name = "stream_reasoning_summary_encrypted.sse"
    assert kept(streamed("responses", name, KEEPING)) == [{"encrypted_content": ENCRYPTED}]
    assert kept(streamed("responses", name, NOT_KEEPING)) == []
    fixture = load_fixture("responses", "nonstream_reasoning_function_call.json")
    answer = answered("responses", fixture["response"], KEEPING)
    assert kept(answer) == [{"encrypted_content": ENCRYPTED}]
    assert kept(answered("responses", fixture["response"], NOT_KEEPING)) == []
    echoed = {
        **fixture["request"],
        "input": [*fixture["request"]["input"], *fixture["response"]["output"]],
    }
    adapter = ADAPTERS["responses"]
    parsed = adapter.keyed(KEEPING).parse_request(echoed)
    assert kept(parsed.items) == [{"encrypted_content": ENCRYPTED}]
    assert kept(adapter.keyed(NOT_KEEPING).parse_request(echoed).items) == []


@pytest.mark.parametrize("payload", [7, "", None, ["x"], {"a": 1}])
def test_odd_payloads_are_never_kept(payload: Any) -> None:
    request = {
        "model": "claude",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": payload},
                    {"type": "redacted_thinking", "data": payload},
                ],
            },
        ],
    }
    assert kept(ADAPTERS["messages"].keyed(KEEPING).parse_request(request).items) == []
    responses = {"model": "m", "input": [{"type": "reasoning", "encrypted_content": payload}]}
    assert kept(ADAPTERS["responses"].keyed(KEEPING).parse_request(responses).items) == []


def test_the_compact_endpoint_keeps_what_it_is_sent() -> None:
    body = {"model": "m", "input": [{"type": "reasoning", "encrypted_content": ENCRYPTED}]}
    compact = keyed(b"install secret", keep_opaque=True)["responses.compact"]
    assert kept(compact.parse_request(body).items) == [{"encrypted_content": ENCRYPTED}]
    assert compact.parse_request(body).compaction  # still the compact endpoint's adapter
