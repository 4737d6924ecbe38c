"""Chat Completions adapter: request items, body rewrites, stream and body decoding, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.continuation.keys import ContinuationKeys
from gateway.errors import BadRequest, BudgetExceeded
from gateway.items import ItemKind, StopReason, Usage
from gateway.opaque import UNKEYED
from gateway.protocols.base import ProtocolAdapter
from gateway.protocols.openai_chat.completions import ADAPTER, OpenAIChatAdapter
from gateway.stream.assembler import Assembler
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    MetaDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEDecoder, SSEEvent
from tests.factories import load_fixture, output_of

MARKER = "SECRET-REASONING-MARKER-91"


def event(data: Any) -> SSEEvent:
    return SSEEvent(event=None, data=data if isinstance(data, str) else json.dumps(data))


def decode(*chunks: Any) -> list[Delta]:
    decoder = ADAPTER.new_event_decoder()
    return [delta for chunk in chunks for delta in decoder.decode(event(chunk))]


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    body = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    body["choices"][0]["finish_reason"] = finish
    return {**body, **extra}


def test_adapter_satisfies_the_protocol() -> None:
    adapter: ProtocolAdapter = OpenAIChatAdapter()
    assert adapter.name == "chat" and ADAPTER.name == "chat"


# --- parse_request


def test_parse_request_items_for_every_message_shape() -> None:
    parsed = ADAPTER.parse_request(load_fixture("chat", "request_roundtrip.json"))
    assert (parsed.model, parsed.stream, parsed.max_output_tokens) == (
        "deepseek-reasoner",
        True,
        4096,
    )
    got = [(i.kind, i.role, i.text, i.call_id, i.tool_name, i.attrs) for i in parsed.items]
    assert got == [
        (ItemKind.INSTRUCTION, "system", "You are a dice game.", None, None, {}),
        (ItemKind.INSTRUCTION, "developer", "Be brief.\nUse tools.", None, None, {}),
        (ItemKind.USER, "user", "Roll for me.", None, None, {}),
        (ItemKind.OTHER, "user", None, None, None, {"type": "image_url"}),
        (
            ItemKind.REASONING,
            "assistant",
            None,
            None,
            None,
            {"chars": 39, "returns": "reasoning_content"},
        ),
        (ItemKind.ASSISTANT_TEXT, "assistant", "Rolling!", None, None, {}),
        (ItemKind.TOOL_CALL, "assistant", None, "call_00_RollRollRollRoll", "roll_dice", {}),
        (
            ItemKind.TOOL_CALL,
            "assistant",
            None,
            None,
            "get_player_name",
            {"internal_id": "lwcall_m3_1"},
        ),
        (ItemKind.TOOL_RESULT, "tool", "4", "call_00_RollRollRollRoll", None, {}),
        (ItemKind.TOOL_RESULT, "tool", "Anne", None, None, {}),
        (ItemKind.REFUSAL, "assistant", "I can't do that.", None, None, {}),
        (ItemKind.TOOL_CALL, "assistant", None, None, "lookup", {"internal_id": "lwcall_m7_0"}),
        (ItemKind.TOOL_RESULT, "function", "found", None, "lookup", {}),
        (ItemKind.USER, "user", "Thanks", None, None, {}),
    ]
    assert parsed.items[6].arguments == "{}"
    dumped = json.dumps([item.to_json() for item in parsed.items])
    assert MARKER not in dumped and "base64" not in dumped


@pytest.mark.parametrize("body", [[], "hi", 1.5])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    with pytest.raises(BadRequest) as raised:
        ADAPTER.parse_request(body)
    assert raised.value.param == "body"


@pytest.mark.parametrize(
    ("body", "expected"),
    [({"model": "m"}, [{"field": "messages", "shape": "null"}]),
     ({"messages": "hi"}, [{"field": "messages", "shape": "string"}]),
     ({"messages": [{"role": "user", "content": "a"}, 3]},
      [{"message_index": 1, "shape": "number"}]),
     ({"messages": [{"role": "critic", "content": "a"}]}, [{"type": "message", "role": "critic"}]),
     ({"messages": [{"role": 5, "content": "a"}]}, [{"type": "message", "role": "number"}])],
)  # fmt: skip
def test_shapes_it_cannot_type_are_other_items_never_errors(
    body: dict[str, Any], expected: list[dict[str, Any]]
) -> None:
    """Forward compatible: the provider judges what the gateway does not know."""
    items = ADAPTER.parse_request(body).items
    assert [item.attrs for item in items if item.kind is ItemKind.OTHER] == expected


def test_parse_request_limits_and_defaults() -> None:
    parsed = ADAPTER.parse_request(
        {"messages": [], "max_tokens": 10, "max_completion_tokens": 20, "stream": "yes"}
    )
    assert parsed.max_output_tokens == 20 and parsed.stream is False and parsed.model is None
    assert ADAPTER.parse_request({"messages": [], "max_tokens": 7}).max_output_tokens == 7


# --- prepare_body


def _prepare(body: dict[str, Any], max_tokens: int | None = None) -> Any:
    return ADAPTER.prepare_body(body, ADAPTER.parse_request(body), max_tokens=max_tokens)


def test_prepare_body_asks_for_usage_and_hides_it() -> None:
    body = {"messages": [], "stream": True, "stream_options": {"x": 1}}
    prepared = _prepare(body)
    assert prepared.body["stream_options"] == {"x": 1, "include_usage": True}
    assert prepared.hide_usage_event and prepared.clamped_max_tokens is None
    assert body["stream_options"] == {"x": 1}  # the client's body is not touched


def test_prepare_body_leaves_a_body_that_needs_nothing() -> None:
    body = {"messages": [], "stream": True, "stream_options": {"include_usage": True}}
    prepared = _prepare(body, max_tokens=100)
    assert prepared.body["max_completion_tokens"] == 100
    assert not prepared.hide_usage_event
    plain = {"messages": [], "max_tokens": 50}
    assert _prepare(plain, max_tokens=100).body is plain
    assert _prepare(plain).body is plain


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, {"max_completion_tokens": 100}),
        ({"max_tokens": 500}, {"max_tokens": 100}),
        ({"max_completion_tokens": 500}, {"max_completion_tokens": 100}),
        ({"max_tokens": 500, "max_completion_tokens": 50}, {"max_tokens": 100}),
    ],
)
def test_prepare_body_clamps_the_clients_limit_field(
    limits: dict[str, int], expected: dict[str, int]
) -> None:
    prepared = _prepare({"messages": [], **limits}, max_tokens=100)
    assert prepared.clamped_max_tokens == 100
    for name, value in expected.items():
        assert prepared.body[name] == value
    if "max_tokens" in limits and "max_completion_tokens" not in limits:
        assert "max_completion_tokens" not in prepared.body


# --- stream decoding


def test_done_and_non_json_lines() -> None:
    assert decode("[DONE]") == [EndDelta()]
    assert decode("not json", "{broken", "[1, 2]", "", "null") == []


def test_meta_once_known_and_text_refusal_finish() -> None:
    deltas = decode(
        {"id": "", "model": "", "choices": [], "prompt_filter_results": []},
        chunk({"role": "assistant", "content": "Hi", "refusal": ""}),
        chunk({"refusal": "No."}, "stop"),
    )
    assert deltas == [
        MetaDelta("c1", "m"),
        TextDelta("Hi"),
        RefusalDelta("No."),
        FinishDelta(StopReason.COMPLETED, "stop"),
    ]


@pytest.mark.parametrize(
    ("raw", "stop"),
    [("stop", StopReason.COMPLETED), ("tool_calls", StopReason.TOOL_CALLS),
     ("function_call", StopReason.TOOL_CALLS), ("length", StopReason.LENGTH),
     ("content_filter", StopReason.CONTENT_FILTER), ("eos", StopReason.UNKNOWN)],
)  # fmt: skip
def test_finish_reasons(raw: str, stop: StopReason) -> None:
    assert decode(chunk({}, raw))[-1] == FinishDelta(stop, raw)


def test_reasoning_fields_are_counted_once() -> None:
    deltas = decode(
        chunk({"reasoning_content": "abcd"}),
        chunk(
            {"reasoning": "xyz", "reasoning_details": [{"type": "reasoning.text", "text": "xyz"}]}
        ),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "12"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "Zm9v"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": "Plan."}]}),
    )
    encrypted = {"encrypted": True, "returns": "reasoning_details"}
    assert [d for d in deltas if not isinstance(d, MetaDelta)] == [
        ReasoningDelta(chars=4, attrs={"returns": "reasoning_content"}),
        ReasoningDelta(chars=3),
        ReasoningDelta(chars=2),
        ReasoningDelta(chars=0, attrs=encrypted, digests=(UNKEYED.of("Zm9v"),)),
        ReasoningSummaryDelta("Plan."),
    ]


def test_usage_variants() -> None:
    (usage,) = [
        d
        for d in decode(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 10,
                    "completion_tokens": 5,
                    "total_tokens": 15,
                    "prompt_tokens_details": {"cached_tokens": 4},
                    "completion_tokens_details": {"reasoning_tokens": 3},
                },
            }
        )
        if isinstance(d, UsageDelta)
    ]
    assert usage.usage == Usage(10, 5, 15, cached_tokens=4, reasoning_tokens=3)
    top = decode({"choices": [], "usage": {"prompt_tokens": 9, "cached_tokens": 8}})
    assert top == [UsageDelta(Usage(prompt_tokens=9, cached_tokens=8))]
    deepseek = decode({"usage": {"prompt_cache_hit_tokens": 7, "total_tokens": True}})
    assert deepseek == [UsageDelta(Usage(cached_tokens=7))]
    # Cache writes: openai.types.CompletionUsage's prompt_tokens_details.cache_write_tokens.
    written = decode(
        {"usage": {"prompt_tokens": 900, "prompt_tokens_details": {"cache_write_tokens": 800}}}
    )
    assert written == [UsageDelta(Usage(prompt_tokens=900, cache_creation_tokens=800))]


def test_midstream_error_chunk() -> None:
    deltas = decode({"error": {"code": 400, "message": "Token limit reached"}, "choices": []})
    assert deltas == [ErrorDelta("Token limit reached", None, "400")]


def test_tool_call_deltas() -> None:
    deltas = decode(
        chunk(
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "id": "", "function": {"arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 3, "function": {"arguments": {"x": 1}}}]}),
        chunk({"function_call": {"name": "legacy", "arguments": "{}"}}),
    )
    assert [d for d in deltas if not isinstance(d, MetaDelta)] == [
        ToolCallStart(0, "a", "f"),
        ToolCallArgs(0, "{}"),
        ToolCallStart(1, None, None),
        ToolCallArgs(1, '{"x": 1}'),
        ToolCallStart(0, None, "legacy"),
        ToolCallArgs(0, "{}"),
    ]


def test_tool_calls_without_index_continue_by_position() -> None:
    deltas = decode(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"x"'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": ": 1}"}}]}),
        chunk({"tool_calls": [{"id": "a", "function": {"arguments": ""}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
    )
    starts = [(d.index, d.call_id) for d in deltas if isinstance(d, ToolCallStart)]
    args = [(d.index, d.fragment) for d in deltas if isinstance(d, ToolCallArgs)]
    assert starts == [(0, "a"), (0, "a"), (1, "b")]
    assert args == [(0, '{"x"'), (0, ": 1}"), (1, "{}")]


def test_whole_transcript_through_the_sse_decoder() -> None:
    sse = SSEDecoder()
    events = sse.decode(load_fixture("chat", "stream_openrouter_error.sse")) + sse.flush()
    decoder = ADAPTER.new_event_decoder()
    deltas = [d for e in events for d in decoder.decode(e)]
    assert isinstance(deltas[-1], EndDelta)
    assert sum(isinstance(d, FinishDelta) for d in deltas) == 2
    assert MARKER not in repr(deltas)


# --- injected usage event


def test_is_injected_usage_event() -> None:
    transcript = load_fixture("chat", "stream_parallel_tool_calls.sse")
    sse = SSEDecoder()
    events = sse.decode(transcript)
    flags = [ADAPTER.is_injected_usage_event(e) for e in events]
    assert flags == [False] * (len(events) - 2) + [True, False]
    azure = {"choices": [], "id": "", "prompt_filter_results": []}
    assert not ADAPTER.is_injected_usage_event(event(azure))
    in_finish = chunk({}, "stop", usage={"total_tokens": 3})
    assert not ADAPTER.is_injected_usage_event(event(in_finish))
    with_error = {"choices": [], "usage": {"total_tokens": 3}, "error": {"message": "x"}}
    assert not ADAPTER.is_injected_usage_event(event(with_error))
    assert not ADAPTER.is_injected_usage_event(event('{"usage": '))


# --- bodies and errors


def test_decode_body_matches_stream_shape() -> None:
    deltas = ADAPTER.decode_body(load_fixture("chat", "nonstream_ollama_reasoning.json"))
    assert deltas == [
        MetaDelta("chatcmpl-918", "gpt-oss:20b"),
        ReasoningDelta(chars=58),
        ToolCallStart(0, "call_ol4r5t6y", "final_result"),
        ToolCallArgs(0, '{"city":"Paris"}'),
        FinishDelta(StopReason.TOOL_CALLS, "tool_calls"),
        UsageDelta(Usage(150, 60, 210)),
        EndDelta(),
    ]
    assert ADAPTER.decode_body("nonsense") == [EndDelta()]


def test_decode_error_shapes() -> None:
    openai = ADAPTER.decode_error(load_fixture("chat", "error_400_unsupported_parameter.json"))
    assert openai == {
        "message": "Unsupported parameter: 'stop' is not supported with this model.",
        "type": "invalid_request_error",
        "code": "unsupported_parameter",
    }
    openrouter = ADAPTER.decode_error(load_fixture("chat", "error_429_openrouter.json"))
    assert openrouter == {"message": "Provider returned error", "type": None, "code": "429"}
    assert ADAPTER.decode_error({"error": "plain"}) == {
        "message": "plain",
        "type": None,
        "code": None,
    }
    google = [{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}]
    assert ADAPTER.decode_error(google) == {"message": "bad", "type": None, "code": "400"}
    assert ADAPTER.decode_error({"detail": "Not found"}) == {
        "message": "Not found",
        "type": None,
        "code": None,
    }
    assert ADAPTER.decode_error({"unrelated": 1}) is None
    assert ADAPTER.decode_error([]) is None


def test_error_body() -> None:
    error = BudgetExceeded("Trace t1 used its 10 steps.", code="step_budget_exceeded")
    assert ADAPTER.error_body(error) == {
        "error": {
            "message": "Trace t1 used its 10 steps.",
            "type": "budget_exceeded",
            "code": "step_budget_exceeded",
            "param": None,
        }
    }
    bad = BadRequest("no messages", param="messages")
    assert ADAPTER.error_body(bad)["error"]["param"] == "messages"


# --- custom (free-form) tools ------------------------------------------------------------


def _assemble(deltas: list[Delta]) -> Any:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler)


CUSTOM_TOOLS: list[Any] = [
    {"type": "custom", "custom": {"name": "code_exec", "format": {"type": "text"}}},
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
]


def test_custom_tools_are_declared_without_schema_and_their_calls_are_free_form() -> None:
    parsed = ADAPTER.parse_request(
        {
            "tools": CUSTOM_TOOLS,
            "messages": [
                {"role": "user", "content": "Sum 1 and 2."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "code_exec", "input": "print(1 + 2)"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_c", "content": "3"},
            ],
        }
    )
    assert parsed.tools == {"code_exec": None, "lookup": {"type": "object"}}
    call = parsed.items[1]
    assert (call.kind, call.call_id, call.tool_name, call.arguments, call.attrs) == (
        ItemKind.TOOL_CALL,
        "call_c",
        "code_exec",
        "print(1 + 2)",
        {"free_form": True},
    )


def test_streamed_custom_tool_call_is_assembled_as_free_form_text() -> None:
    custom = {"name": "code_exec", "input": ""}
    first = {"index": 0, "id": "call_c", "type": "custom", "custom": custom}
    deltas = decode(
        chunk({"role": "assistant", "tool_calls": [first]}),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": "print(1"}}]}),
        chunk({"tool_calls": [{"index": 0, "custom": {"input": " + 2)"}}]}),
        chunk({}, finish="tool_calls"),
        "[DONE]",
    )
    result = _assemble(deltas)
    assert result.violations == [] and result.stop_reason is StopReason.TOOL_CALLS
    (call,) = result.output_items
    assert (call.tool_name, call.arguments, call.attrs) == (
        "code_exec",
        "print(1 + 2)",
        {"free_form": True},
    )


@pytest.mark.parametrize(
    ("choice", "extra", "expected"),
    [
        ({"delta": {"content": "hi"}}, {}, [TextDelta("hi")]),
        ({"index": 1, "delta": {"role": "assistant", "content": "hi"}}, {}, [TextDelta("hi", 1)]),
        ({"delta": {"content": ""}}, {}, []),
        (
            {"delta": {"content": "hi"}, "finish_reason": None, "logprobs": None},
            {},
            [TextDelta("hi")],
        ),
        # Anything more is read by the general walk.
        (
            {"delta": {"content": "hi"}, "finish_reason": "stop"},
            {},
            [TextDelta("hi"), FinishDelta(StopReason.COMPLETED, "stop")],
        ),
        (
            {"delta": {"content": "hi", "reasoning_content": "hmm"}},
            {},
            [ReasoningDelta(chars=3, attrs={"returns": "reasoning_content"}), TextDelta("hi")],
        ),
        (
            {"delta": {"content": "hi"}},
            {"usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
            [TextDelta("hi"), UsageDelta(Usage(1, 2, 3))],
        ),
    ],
)
def test_plain_content_chunks_and_the_rest(
    choice: dict[str, Any], extra: dict[str, Any], expected: list[Any]
) -> None:
    decoder = ADAPTER.new_event_decoder()
    decoder.decode(SSEEvent(None, json.dumps({"id": "c1", "model": "m", "choices": []})))
    chunk = {"id": "c1", "model": "m", "choices": [choice], **extra}
    assert decoder.decode(SSEEvent(None, json.dumps(chunk))) == expected


# A web-search model's answer (`gpt-4o-search-preview`): the search ran at the provider and
# left no call, only `url_citation` annotations over spans of the text (shape from the openai
# package's `types/chat/chat_completion_message.py`, `Annotation` / `AnnotationURLCitation`).
CITED = "The ESA launched a probe ([esa.int](https://www.esa.int/probe))."
SEARCHED = {
    "role": "assistant",
    "content": CITED,
    "refusal": None,
    "annotations": [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": 26,
                "end_index": 64,
                "title": "ESA launches probe",
                "url": "https://www.esa.int/probe",
            },
        }
    ],
}


def test_a_web_search_answer_keeps_its_text_whole_and_its_echo_continues() -> None:
    body = {
        "id": "chatcmpl-9",
        "model": "gpt-4o-search-preview",
        "choices": [{"index": 0, "message": SEARCHED, "finish_reason": "stop"}],
    }
    result = _assemble(ADAPTER.decode_body(body))
    assert [(i.kind, i.text) for i in result.output_items] == [(ItemKind.ASSISTANT_TEXT, CITED)]
    assert (result.stop_reason, result.violations) == (StopReason.COMPLETED, [])
    keys = ContinuationKeys(b"k" * 32)
    question = {"role": "user", "content": "ESA news?"}
    asked = ADAPTER.parse_request({"messages": [question]}).items
    recorded = keys.step_key(keys.chain(asked), result.output_items)
    echoed = [question, SEARCHED, {"role": "user", "content": "When?"}]
    history = ADAPTER.parse_request({"messages": echoed}).items
    assert recorded in [b.key for b in keys.scan(history).boundaries]
