"""Assembler: chat fixture streams through SSE decoder + chat adapter + assembler."""

from __future__ import annotations

import json

import pytest

from gateway.items import Item, ItemKind, StopReason, Usage, ViolationKind
from gateway.protocols.openai_chat.completions import ADAPTER
from gateway.stream.assembler import TRANSITIONS, Assembled, Assembler, State
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    MetaDelta,
    ReasoningDelta,
    ReasoningSummaryDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEDecoder
from tests.factories import fixture_names, load_fixture, output_of

MARKER = "SECRET-REASONING-MARKER-91"


def stream_deltas(transcript: bytes) -> list[Delta]:
    sse = SSEDecoder()
    events = sse.decode(transcript) + sse.flush()
    decoder = ADAPTER.new_event_decoder()
    return [delta for event in events for delta in decoder.decode(event)]


def assemble(deltas: list[Delta], *, cancelled: bool = False) -> Assembled:
    assembler = Assembler()
    for delta in deltas:
        assembler.feed(delta)
    return output_of(assembler, cancelled=cancelled)


def assemble_fixture(name: str) -> Assembled:
    if name.endswith(".sse"):
        return assemble(stream_deltas(load_fixture("chat", name)))
    return assemble(ADAPTER.decode_body(load_fixture("chat", name)))


def calls(result: Assembled) -> list[tuple[str | None, str | None, str | None]]:
    return [
        (item.call_id, item.tool_name, item.arguments)
        for item in result.output_items
        if item.kind is ItemKind.TOOL_CALL
    ]


def kinds(items: list[Item]) -> list[ItemKind]:
    return [item.kind for item in items]


def test_parallel_tool_calls_with_usage() -> None:
    result = assemble_fixture("stream_parallel_tool_calls.sse")
    assert calls(result) == [
        ("call_Aa11Bb22Cc33Dd44Ee55Ff66", "get_weather", '{"city": "Oslo"}'),
        ("call_Gg77Hh88Ii99Jj00Kk11Ll22", "get_weather", '{"city": "Lima"}'),
    ]
    assert result.stop_reason is StopReason.TOOL_CALLS
    assert result.raw_stop_reason == "tool_calls"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (82, 48)
    assert result.usage.total_tokens == 130
    assert result.response_id == "chatcmpl-Fx1parallelTools0001"
    assert result.model == "gpt-4o-2024-08-06"
    assert result.complete and result.violations == [] and result.anomalies == []
    assert all(item.role == "assistant" for item in result.output_items)


def test_text_stream() -> None:
    result = assemble_fixture("stream_text.sse")
    assert kinds(result.output_items) == [ItemKind.ASSISTANT_TEXT]
    assert result.output_items[0].text == "Bonjour — ça va très bien 🙂!"
    assert result.stop_reason is StopReason.COMPLETED
    assert result.usage.total() == 21


@pytest.mark.parametrize("name", ["stream_refusal.sse", "nonstream_refusal.json"])
def test_refusal_only_output_is_a_refusal_stop(name: str) -> None:
    result = assemble_fixture(name)
    assert kinds(result.output_items) == [ItemKind.REFUSAL]
    assert result.output_items[0].text is not None
    assert result.output_items[0].text.startswith("I'm sorry")
    assert result.stop_reason is StopReason.REFUSAL
    assert result.raw_stop_reason == "stop"


def test_deepseek_reasoning_is_counted_never_kept() -> None:
    deltas = stream_deltas(load_fixture("chat", "stream_deepseek_reasoning.sse"))
    result = assemble(deltas)
    assert kinds(result.output_items) == [ItemKind.REASONING, ItemKind.ASSISTANT_TEXT]
    reasoning = result.output_items[0]
    assert reasoning.text is None
    # DeepSeek wants it back in a tool loop: that is noted, the text is not kept.
    assert reasoning.attrs == {"chars": 76, "tokens": 22, "returns": "reasoning_content"}
    assert result.output_items[1].text == "Hello! How can I help?"
    assert result.usage.reasoning_tokens == 22
    # Usage arrived inside the finish chunk.
    assert result.usage.total_tokens == 38 and result.stop_reason is StopReason.COMPLETED
    assert MARKER not in repr(deltas)
    assert MARKER not in repr(result)


@pytest.mark.parametrize("name", fixture_names("chat", "*.*"))
def test_marker_never_reaches_an_item(name: str) -> None:
    if name.startswith(("error_", "request_")):
        return
    result = assemble_fixture(name)
    assert MARKER not in json.dumps([item.to_json() for item in result.output_items])


def test_openrouter_comments_reasoning_length_then_error() -> None:
    result = assemble_fixture("stream_openrouter_error.sse")
    assert result.stop_reason is StopReason.ERROR
    assert result.raw_stop_reason == "length"
    assert result.error == {"message": "Token limit reached", "type": None, "code": "400"}
    assert kinds(result.output_items) == [ItemKind.REASONING]
    assert result.output_items[0].attrs["tokens"] == 12
    assert result.usage.total_tokens == 52
    assert result.complete
    assert result.anomalies == []  # the repeated finish reason is legal


def test_mistral_calls_without_index_do_not_merge() -> None:
    result = assemble_fixture("stream_mistral_no_index.sse")
    assert calls(result) == [
        ("Xy7Kp2Lm9", "get_weather", '{"location": "Paris"}'),
        ("Qw3Er5Ty8", "get_time", '{"zone": "Europe/Paris"}'),
    ]
    assert result.usage.total_tokens == 160
    assert result.stop_reason is StopReason.TOOL_CALLS and result.anomalies == []


def test_qwen_empty_continuation_ids() -> None:
    result = assemble_fixture("stream_qwen_empty_ids.sse")
    assert calls(result) == [
        ("call_qwen0000aaaa1111bbbb2222", "search_docs", '{"query": "rate limits"}')
    ]
    assert result.usage.cached_tokens == 256
    assert result.violations == []


@pytest.mark.parametrize(
    "name", ["stream_ollama_unsplit.sse", "stream_ollama_one_chunk_same_index.sse"]
)
def test_ollama_whole_calls_stay_separate(name: str) -> None:
    result = assemble_fixture(name)
    assert [c[0] for c in calls(result)] == ["call_k2j4h6g8", "call_p1o3i5u7"]
    assert all(json.loads(c[2] or "") for c in calls(result))
    assert result.violations == []


def test_tool_call_index_starting_at_1() -> None:
    result = assemble_fixture("stream_index_starts_at_1.sse")
    assert kinds(result.output_items) == [ItemKind.ASSISTANT_TEXT, ItemKind.TOOL_CALL]
    assert calls(result) == [("toolu_01FxIndexOne", "read_file", '{"path": "notes.md"}')]


def test_llamacpp_with_done_and_timings() -> None:
    result = assemble_fixture("stream_llamacpp_timings.sse")
    assert calls(result)[0][2] == '{"command":"git status"}'
    assert result.stop_reason is StopReason.TOOL_CALLS
    assert result.violations == []


def test_missing_done_is_an_interrupted_stream() -> None:
    result = assemble_fixture("stream_llamacpp_no_done.sse")
    assert result.stop_reason is StopReason.INTERRUPTED
    assert result.raw_stop_reason == "tool_calls"
    assert not result.complete
    # The choice finished, so its call is whole even though [DONE] never came.
    assert "incomplete" not in result.output_items[0].attrs
    assert kinds_of(result) == [ViolationKind.STREAM_INTERRUPTED]


def test_vllm_tool_call_with_empty_model() -> None:
    result = assemble_fixture("stream_vllm_tool_call.sse")
    assert calls(result)[0][1:] == ("run_command", '{"command": "make test"}')
    assert result.model is None and result.response_id is not None


def test_azure_prompt_filter_chunk_has_no_identity() -> None:
    result = assemble_fixture("stream_azure_prompt_filter.sse")
    assert result.response_id == "chatcmpl-AzureFx000000000000000012"
    assert result.output_items[0].text == "Why did the cat sit?"
    assert result.usage == Usage()


def test_gemini_empty_id_gets_an_internal_id() -> None:
    result = assemble_fixture("nonstream_gemini_empty_id.json")
    (item,) = result.output_items
    assert item.call_id is None
    assert item.attrs == {"internal_id": "lwcall_0_0"}
    assert item.arguments == "{}"


def test_nonstream_bodies() -> None:
    parallel = assemble_fixture("nonstream_parallel_tool_calls.json")
    assert len(calls(parallel)) == 2 and parallel.complete
    length = assemble_fixture("nonstream_finish_length.json")
    assert length.stop_reason is StopReason.LENGTH
    cached = assemble_fixture("nonstream_usage_cached_tokens.json")
    assert (cached.usage.cached_tokens, cached.usage.prompt_tokens) == (1024, 1180)


def test_stream_cut_mid_arguments_is_interrupted() -> None:
    transcript = load_fixture("chat", "stream_parallel_tool_calls.sse")
    cut = transcript.index(b'"arguments":"ty\\": \\"Li')
    result = assemble(stream_deltas(transcript[:cut]))
    assert result.stop_reason is StopReason.INTERRUPTED
    assert result.raw_stop_reason is None and not result.complete
    first, second = (i for i in result.output_items if i.kind is ItemKind.TOOL_CALL)
    assert second.attrs == {"incomplete": True}
    assert second.arguments == '{"ci'
    assert "incomplete" in first.attrs  # the choice never finished
    (violation,) = result.violations
    assert violation.kind is ViolationKind.STREAM_INTERRUPTED
    assert "get_weather" in violation.detail


def test_cancelled_stream_has_no_interrupted_violation() -> None:
    transcript = load_fixture("chat", "stream_text.sse")
    result = assemble(stream_deltas(transcript[:600]), cancelled=True)
    assert result.stop_reason is StopReason.CANCELLED
    assert result.violations == []


def test_deltas_after_the_end_are_anomalies_not_errors() -> None:
    assembler = Assembler()
    assembler.feed(TextDelta("hi"))
    assembler.feed(FinishDelta(StopReason.COMPLETED, "stop"))
    assembler.feed(EndDelta())
    assembler.feed(TextDelta(" more"))
    assembler.feed(EndDelta())
    result = output_of(assembler)
    assert result.output_items[0].text == "hi"
    assert result.anomalies == ["TextDelta in state ended", "EndDelta in state ended"]
    assert assembler.state is State.ENDED


def test_content_after_a_choice_finished_is_an_anomaly() -> None:
    result = assemble([FinishDelta(StopReason.COMPLETED, "stop"), TextDelta("late"), EndDelta()])
    assert result.anomalies == ["content for choice 0 after its finish"]


def test_transition_table_allows_nothing_after_the_end() -> None:
    assert not [pair for pair in TRANSITIONS if pair[0] is State.ENDED]


def test_end_without_finish_is_unknown() -> None:
    result = assemble([TextDelta("x"), EndDelta()])
    assert result.stop_reason is StopReason.UNKNOWN and result.complete


def test_error_delta_sets_error_and_stop_reason() -> None:
    result = assemble([TextDelta("x"), ErrorDelta("boom", "server_error", "500")])
    assert result.stop_reason is StopReason.ERROR
    assert result.error == {"message": "boom", "type": "server_error", "code": "500"}
    assert result.violations == []  # the error explains the end


def test_reasoning_summary_tokens_and_attrs() -> None:
    result = assemble(
        [
            MetaDelta("resp_1", "o4-mini"),
            ReasoningDelta(chars=10, attrs={"encrypted": True}),
            ReasoningSummaryDelta("Thought about "),
            ReasoningSummaryDelta("weather."),
            TextDelta("Sunny."),
            FinishDelta(StopReason.COMPLETED, "completed"),
            UsageDelta(Usage(prompt_tokens=5, completion_tokens=50, reasoning_tokens=40)),
            EndDelta(),
        ]
    )
    reasoning = result.output_items[0]
    assert reasoning.text == "Thought about weather."
    assert reasoning.attrs == {"chars": 10, "encrypted": True, "tokens": 40}


def test_reasoning_tokens_alone_make_a_reasoning_item() -> None:
    result = assemble(
        [
            FinishDelta(StopReason.LENGTH, "length"),
            UsageDelta(Usage(completion_tokens=50, reasoning_tokens=50)),
            EndDelta(),
        ]
    )
    assert [(i.kind, i.attrs) for i in result.output_items] == [
        (ItemKind.REASONING, {"tokens": 50})
    ]


def test_tool_call_ids_names_and_explicit_end() -> None:
    result = assemble(
        [
            ToolCallStart(0, "call_a", "first"),
            ToolCallStart(0, "", None),
            ToolCallStart(0, "call_a", "first"),
            ToolCallArgs(0, '{"a":'),
            ToolCallArgs(0, " 1}"),
            ToolCallStart(1, None, "second"),
            ToolCallArgs(1, '{"partial'),
            ToolCallEnd(1, arguments='{"b": 2}'),
        ],
        cancelled=True,
    )
    first, second = result.output_items
    assert (first.call_id, first.tool_name, first.arguments) == ("call_a", "first", '{"a": 1}')
    assert first.attrs == {"incomplete": True}
    assert second.arguments == '{"b": 2}'
    assert second.attrs == {"internal_id": "lwcall_0_1"}
    assert result.stop_reason is StopReason.CANCELLED


def test_item_order_and_multiple_choices() -> None:
    result = assemble(
        [
            ToolCallStart(0, "c1", "t", choice=1),
            TextDelta("b", choice=1),
            TextDelta("a"),
            ReasoningDelta(chars=3),
            FinishDelta(StopReason.COMPLETED, "stop"),
            FinishDelta(StopReason.TOOL_CALLS, "tool_calls", choice=1),
            EndDelta(),
        ]
    )
    assert [(i.kind, i.attrs.get("choice", 0)) for i in result.output_items] == [
        (ItemKind.REASONING, 0),
        (ItemKind.ASSISTANT_TEXT, 0),
        (ItemKind.ASSISTANT_TEXT, 1),
        (ItemKind.TOOL_CALL, 1),
    ]
    assert result.stop_reason is StopReason.COMPLETED  # the first choice decides
    assert result.anomalies == []


def kinds_of(result: Assembled) -> list[ViolationKind]:
    return [v.kind for v in result.violations]


def test_a_free_form_call_keeps_its_text_and_its_facts() -> None:
    """A custom tool's input is text: no invalid_tool_arguments, facts kept on the item."""
    assembler = Assembler()
    assembler.feed(ToolCallStart(0, "call_x", "exec", attrs={"free_form": True}))
    for piece in ("echo", " {not json"):
        assembler.feed(ToolCallArgs(0, piece))
    assembler.feed(ToolCallStart(0, "call_x", "exec"))  # a repeated start adds nothing
    assembler.feed(ToolCallEnd(0))
    assembler.feed(FinishDelta(StopReason.TOOL_CALLS, "completed"))
    assembler.feed(EndDelta())
    result = output_of(assembler)
    assert result.violations == []
    (call,) = result.output_items
    assert (call.arguments, call.attrs) == ("echo {not json", {"free_form": True})
    # The same text as a function call's JSON arguments is flagged.
    plain = Assembler()
    for delta in (
        ToolCallStart(0, "call_y", "exec"),
        ToolCallArgs(0, "echo {not json"),
        ToolCallEnd(0),
        FinishDelta(StopReason.TOOL_CALLS, "completed"),
        EndDelta(),
    ):
        plain.feed(delta)
    flagged = output_of(plain).violations
    assert [v.kind for v in flagged] == [ViolationKind.INVALID_TOOL_ARGUMENTS]
