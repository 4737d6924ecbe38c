"""OpenAI Responses over a WebSocket: which client frames are requests (and warm-ups, on which
lane, continuing what), which server frames end a response, the frames the gateway writes
itself, and that a frame's event decodes as the same event of the HTTP stream does.

Shapes: the installed `openai` package's `types/responses/responses_client_event.py`
(`ResponseCreate`) and `responses_server_event.py` (`ResponseWsError`); the server's events
are the stream's (the SSE fixtures of tests/fixtures/responses/, one event a frame).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses.responses_server_event import ResponseWsError

from gateway.errors import BudgetExceeded, PairingViolation
from gateway.protocols.openai_responses import ADAPTER
from gateway.protocols.openai_responses_socket import SOCKET
from gateway.stream.assembler import Assembler
from gateway.stream.sse import SSEDecoder
from tests.factories import fixture_names, load_fixture


def frame(**fields: Any) -> str:
    return json.dumps({"type": "response.create", "model": "gpt-5", **fields})


def test_a_create_frame_is_a_request_with_the_bodys_fields() -> None:
    text = frame(input="Hi", stream_id="lane-1", previous_response_id="resp_1", store=False)
    read = SOCKET.client_frame(text)
    assert read is not None
    assert read.body == {
        "model": "gpt-5",
        "input": "Hi",
        "previous_response_id": "resp_1",
        "store": False,
    }
    assert (read.lane, read.continues, read.warmup) == ("lane-1", "resp_1", False)
    parsed = ADAPTER.parse_request(read.body)
    assert [(i.kind.value, i.text) for i in parsed.items] == [("user", "Hi")]


@pytest.mark.parametrize(
    "fields",
    [{"generate": False}, {"prompt_cache_options": {"prewarm": True}, "generate": True}],
    ids=["generate-false", "cache-prewarm"],
)
def test_a_warm_up_generates_nothing(fields: dict[str, Any]) -> None:
    read = SOCKET.client_frame(frame(input=[], **fields))
    assert read is not None and read.warmup


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"type": "response.processed", "response_id": "resp_1"}),
        json.dumps({"type": "response.steer", "previous_response_id": "r", "input": "stop"}),
        json.dumps(["response.create"]),
        '{"type": "response.create", ',  # not JSON: the provider judges it
        '{"type": "response.create", "input": "\\ud800"}',  # no Unicode text
    ],
    ids=["processed", "steer", "not-object", "not-json", "lone-surrogate"],
)
def test_other_frames_pass_unread(text: str) -> None:
    assert SOCKET.client_frame(text) is None


def test_a_rewritten_request_keeps_its_frames_envelope() -> None:
    read = SOCKET.client_frame(frame(input="Hi", stream_id="b"))
    assert read is not None
    clamped = {**read.body, "max_output_tokens": 64}
    assert json.loads(SOCKET.encode(read, clamped)) == {
        "type": "response.create",
        "stream_id": "b",
        "model": "gpt-5",
        "input": "Hi",
        "max_output_tokens": 64,
    }


@pytest.mark.parametrize(
    ("kind", "final"),
    [
        ("response.created", False),
        ("response.output_text.delta", False),
        ("codex.rate_limits", False),
        ("response.completed", True),
        ("response.incomplete", True),
        ("response.failed", True),
        ("error", True),
    ],
)
def test_a_responses_final_event(kind: str, final: bool) -> None:
    read = SOCKET.server_frame(json.dumps({"type": kind, "stream_id": "a"}))
    assert read is not None and (read.final, read.lane, read.status) == (final, "a", None)


def test_an_error_event_carries_its_status() -> None:
    event = {"type": "error", "status": 400, "error": {"code": "previous_response_not_found"}}
    assert SOCKET.server_frame(json.dumps(event)).status == 400  # type: ignore[union-attr]
    named = {"type": "error", "status_code": 429, "error": {"type": "usage_limit_reached"}}
    assert SOCKET.server_frame(json.dumps(named)).status == 429  # type: ignore[union-attr]
    assert SOCKET.server_frame("not json") is None


def test_a_request_continuing_a_warm_up_stands_for_both() -> None:
    warmup = {"model": "gpt-5", "input": "Plan it.", "previous_response_id": "resp_0"}
    result = {"type": "function_call_output", "call_id": "c", "output": "ok"}
    body = {"model": "gpt-5", "input": [result], "previous_response_id": "resp_warm"}
    assert SOCKET.after_warmup(warmup, body) == {
        "model": "gpt-5",
        "input": [{"type": "message", "role": "user", "content": "Plan it."}, result],
        "previous_response_id": "resp_0",
    }
    first = SOCKET.after_warmup({"input": []}, {"input": "Go", "previous_response_id": "w"})
    assert first == {"input": [{"type": "message", "role": "user", "content": "Go"}]}


@pytest.mark.parametrize(
    ("error", "lane"),
    [
        (BudgetExceeded("Over the step budget.", code="step_budget_exceeded"), None),
        (PairingViolation("Orphan.", rule="orphan_tool_result", call_id="c", param="input"), "b"),
    ],
)
def test_a_refusal_is_the_sdks_error_event(error: Exception, lane: str | None) -> None:
    assert isinstance(error, BudgetExceeded | PairingViolation)
    text = SOCKET.error_frame(error, lane, {**error.headers, "X-Loopwatch-Trace-Id": "t1"})
    event = ResponseWsError.model_validate(json.loads(text))
    assert (event.status, event.stream_id) == (error.status, lane)
    assert (event.error.code, event.error.type) == (error.code, error.type)
    assert event.error.headers is not None and event.error.headers["X-Loopwatch-Trace-Id"] == "t1"


@pytest.mark.parametrize("name", fixture_names("responses", "*.sse"))
def test_a_frame_decodes_as_the_streams_event(name: str) -> None:
    """Each event of a recorded stream, sent as a frame, assembles to the same output."""
    events = SSEDecoder().decode(load_fixture("responses", name))
    by_stream, by_frame = Assembler(), Assembler()
    stream_decoder, frame_decoder = ADAPTER.new_event_decoder(), SOCKET.new_frame_decoder()
    for event in events:
        for delta in stream_decoder.decode(event):
            by_stream.feed(delta)
        read = SOCKET.server_frame(event.data)
        if read is not None:
            for delta in frame_decoder.decode_data(read.data):
                by_frame.feed(delta)
    assert by_frame.output() == by_stream.output()
    assert by_frame.usage == by_stream.usage and by_frame.state is by_stream.state
