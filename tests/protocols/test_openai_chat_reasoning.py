"""What Chat Completions providers want back in a tool loop, as the adapter records it: the
same facts from an answer (whole or streamed) and from its echo in the next request, and
never the reasoning text or the payloads themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.items import Item, ItemKind
from gateway.opaque import UNKEYED
from gateway.protocols.openai_chat.completions import ADAPTER
from gateway.stream.assembler import Assembler
from gateway.stream.sse import SSEEvent
from tests.factories import load_fixture, output_of

THOUGHT = "CiQBjz1rX0TQUGHTSIGMARK-4c1d"  # planted in each opaque payload below
SECRET = "REASONMARK-93b1"  # planted in each reasoning text below

# DeepSeek thinking mode with tool calls (api-docs.deepseek.com/guides/thinking_mode, "Tool
# Calls"): `reasoning_content` beside `tool_calls`, to be sent back in the loop's requests.
DEEPSEEK = {
    "role": "assistant",
    "content": "",
    "reasoning_content": f"Need the weather first. {SECRET}",
    "tool_calls": [
        {
            "id": "call_00_ds",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
# Gemini's OpenAI compatibility (ai.google.dev/gemini-api/docs/thought-signatures, "OpenAI
# compatibility"): the first call of a turn carries `extra_content.google.thought_signature`.
GEMINI = {
    "role": "assistant",
    "tool_calls": [
        {
            "extra_content": {"google": {"thought_signature": THOUGHT + "A"}},
            "function": {"arguments": '{"city": "Paris"}', "name": "get_weather"},
            "id": "function-call-1",
            "type": "function",
        },
        {
            "function": {"arguments": '{"city": "Oslo"}', "name": "get_weather"},
            "id": "function-call-2",
            "type": "function",
        },
    ],
}
# OpenRouter (openrouter.ai/docs/use-cases/reasoning-tokens, "Preserving reasoning blocks"):
# `reasoning_details` entries, a signed text one and an encrypted one, to be sent back as is.
OPENROUTER = {
    "role": "assistant",
    "content": None,
    "reasoning": f"Think. {SECRET}",
    "reasoning_details": [
        {
            "type": "reasoning.text",
            "text": f"Think. {SECRET}",
            "signature": THOUGHT + "T",
            "id": "rd_1",
            "format": "anthropic-claude-v1",
            "index": 0,
        },
        {
            "type": "reasoning.encrypted",
            "data": THOUGHT + "E",
            "id": "rd_2",
            "format": "google-gemini-v1",
            "index": 1,
        },
    ],
    "tool_calls": DEEPSEEK["tool_calls"],
}


def answer(message: dict[str, Any]) -> list[Item]:
    """The output items of a whole chat.completion carrying `message`."""
    body = {
        "id": "chatcmpl-r",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    assembler = Assembler()
    for delta in ADAPTER.decode_body(body):
        assembler.feed(delta)
    return output_of(assembler).output_items


def streamed(*deltas: dict[str, Any]) -> list[Item]:
    decoder = ADAPTER.new_event_decoder()
    assembler = Assembler()
    chunks = [{"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d}]} for d in deltas]
    last = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}}]}
    last["choices"][0]["finish_reason"] = "tool_calls"
    for chunk in [*chunks, last]:
        for delta in decoder.decode(SSEEvent(None, json.dumps(chunk))):
            assembler.feed(delta)
    return output_of(assembler).output_items


def echoed(message: dict[str, Any]) -> list[Item]:
    return ADAPTER.parse_request({"messages": [message]}).items


def facts(items: list[Item]) -> list[tuple[ItemKind, str | None, Any, Any]]:
    return [(i.kind, i.call_id, i.attrs.get("returns"), i.attrs.get("digests")) for i in items]


def assert_nothing_kept(items: list[Item]) -> None:
    dumped = json.dumps([item.to_json() for item in items])
    assert SECRET not in dumped and THOUGHT not in dumped


@pytest.mark.parametrize("message", [DEEPSEEK, GEMINI, OPENROUTER], ids=lambda m: m["role"])
def test_the_answer_and_its_echo_record_the_same_facts(message: dict[str, Any]) -> None:
    recorded, echo = answer(message), echoed(message)
    owed = [f for f in facts(recorded) if f[2] is not None]
    assert owed and owed == [f for f in facts(echo) if f[2] is not None]
    assert_nothing_kept([*recorded, *echo])


def test_deepseek_reasoning_content_is_owed_by_presence() -> None:
    assert facts(answer(DEEPSEEK))[0] == (ItemKind.REASONING, None, "reasoning_content", None)


def test_a_thought_signature_is_owed_by_the_call_that_carries_it() -> None:
    first, second = answer(GEMINI)
    assert first.attrs["returns"] == "thought_signature"
    assert first.attrs["digests"] == [UNKEYED.of(THOUGHT + "A")]
    assert "returns" not in second.attrs


def test_openrouter_owes_each_signed_or_encrypted_detail() -> None:
    reasoning = answer(OPENROUTER)[0]
    assert reasoning.attrs["returns"] == "reasoning_details"
    assert reasoning.attrs["digests"] == [UNKEYED.of(THOUGHT + "T"), UNKEYED.of(THOUGHT + "E")]
    assert reasoning.attrs["encrypted"] is True


def test_a_stream_records_what_the_whole_answer_records() -> None:
    call = GEMINI["tool_calls"][0]
    start = {**call, "index": 0, "function": {"name": "get_weather", "arguments": ""}}
    pieces = [
        {"reasoning_content": "Need the weather "},
        {"reasoning_content": f"first. {SECRET}"},
        {"reasoning_details": [{**OPENROUTER["reasoning_details"][0], "signature": None}]},
        {"reasoning_details": [{"type": "reasoning.text", "text": "", "signature": THOUGHT + "T"}]},
        {"tool_calls": [start]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]},
    ]
    reasoning, first = streamed(*pieces)
    assert reasoning.attrs["digests"] == [UNKEYED.of(THOUGHT + "T")]
    assert first.attrs["digests"] == answer(GEMINI)[0].attrs["digests"]
    assert_nothing_kept([reasoning, first])


def test_a_signature_on_a_later_fragment_of_the_call_is_kept() -> None:
    start = {"index": 0, "id": "function-call-1", "function": {"name": "f", "arguments": ""}}
    signed = {"index": 0, "extra_content": {"google": {"thought_signature": THOUGHT}}}
    (call,) = streamed({"tool_calls": [start]}, {"tool_calls": [signed]})
    assert call.attrs["digests"] == [UNKEYED.of(THOUGHT)]


@pytest.mark.parametrize(
    "extra",
    [
        None,
        "text",
        {"google": None},
        {"google": {"thought_signature": ""}},
        {"google": {"thought_signature": 7}},
        {"other": {"thought_signature": THOUGHT}},
    ],
)
def test_a_call_without_a_signature_owes_nothing(extra: Any) -> None:
    call = {**GEMINI["tool_calls"][1], "extra_content": extra}
    (item,) = answer({"role": "assistant", "tool_calls": [call]})
    assert "returns" not in item.attrs


def test_reasoning_that_is_not_owed_stays_a_size() -> None:
    """`reasoning` (OpenRouter, Ollama), unsigned details and Gemini's message-level
    signature are never refused back: only their size is recorded."""
    (plain,) = echoed({"role": "assistant", "reasoning": "hmm", "content": None})
    assert plain.attrs == {"chars": 3}
    unsigned = [{"type": "reasoning.text", "text": "t", "signature": None}]
    (text,) = echoed({"role": "assistant", "reasoning_details": unsigned, "content": "x"})
    assert text.kind is ItemKind.ASSISTANT_TEXT
    body = load_fixture("chat", "nonstream_gemini_empty_id.json")
    assert all("returns" not in item.attrs for item in answer(body["choices"][0]["message"]))


def test_a_custom_tool_call_keeps_both_facts() -> None:
    call = {
        "id": "call_c",
        "type": "custom",
        "custom": {"name": "patch", "input": "*** Begin Patch"},
        "extra_content": {"google": {"thought_signature": THOUGHT}},
    }
    (item,) = echoed({"role": "assistant", "tool_calls": [call]})
    assert item.attrs["free_form"] is True and item.attrs["returns"] == "thought_signature"


@pytest.mark.parametrize(
    "details",
    [
        "not a list",
        ["text", 3, None],
        [{"type": "reasoning.encrypted", "data": 5}, {"type": "reasoning.text", "signature": ""}],
        [{"type": "reasoning.encrypted", "signature": THOUGHT}],  # encrypted: only `data` counts
    ],
)
def test_details_of_other_shapes_owe_nothing(details: Any) -> None:
    message = {"role": "assistant", "reasoning": "r", "reasoning_details": details}
    for item in [*answer(message), *echoed(message)]:
        assert "returns" not in item.attrs and "digests" not in item.attrs
