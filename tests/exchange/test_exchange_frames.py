"""The exchange of a response over a WebSocket: frames in (each one event the client has
already), commands out. The first frame is the response's head, its final frame its end; an
error event in place of the response is a refusal with the status it carries.

Frames: the events of tests/fixtures/responses/stream_parallel_function_calls.sse (a recorded
Responses stream), one a frame, as OpenAI's WebSocket mode sends the stream's events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.exchange.machine import AbortClient, CloseUpstream, Command, Exchange
from gateway.items import StopReason, ViolationKind
from gateway.protocols.frames import ServerFrame
from gateway.protocols.openai_responses import ADAPTER
from gateway.protocols.openai_responses_socket import SOCKET
from gateway.stream.sse import SSEDecoder
from tests.exchange.playbook import broke, finished, gone, outcome_of, play, settled
from tests.factories import load_fixture

EVENTS = [
    e.data for e in SSEDecoder().decode(load_fixture("responses", "stream_parallel_function_calls"))
]


def read(text: str) -> ServerFrame:
    found = SOCKET.server_frame(text)
    assert found is not None
    return found


def frame(text: str) -> Callable[[Exchange], list[Command]]:
    return lambda x: x.frame(read(text))


def event(**fields: Any) -> str:
    return json.dumps(fields)


def exchange() -> Exchange:
    return Exchange(ADAPTER, frames=SOCKET.new_frame_decoder())


def test_a_response_finishes_at_its_final_frame() -> None:
    *body, final = EVENTS
    commands = play(
        exchange(),
        [
            *((frame(text), []) for text in body),
            (frame(final), [settled(1150), finished(stop_reason=StopReason.TOOL_CALLS)]),
        ],
    )
    outcome = outcome_of(commands)
    assert outcome.http_status == 200 and outcome.complete
    assert [i.tool_name for i in outcome.output_items] == ["get_weather", "get_weather"]
    assert outcome.violations == ()


def test_an_error_event_in_place_of_the_response_is_a_refusal_with_its_status() -> None:
    error = {
        "type": "invalid_request_error",
        "code": "previous_response_not_found",
        "message": "Previous response with id 'resp_x' not found.",
        "param": "previous_response_id",
    }
    refused = event(type="error", status=400, error=error)
    commands = play(
        exchange(),
        [(frame(refused), [settled(None), finished(stop_reason=StopReason.ERROR)])],
    )
    outcome = outcome_of(commands)
    assert outcome.http_status == 400 and outcome.no_answer
    assert outcome.error["code"] == "previous_response_not_found"


def test_an_error_event_mid_response_ends_it_as_an_error() -> None:
    failed = event(type="error", error={"type": "server_error", "message": "overloaded"})
    commands = play(
        exchange(),
        [
            (frame(EVENTS[0]), []),
            (frame(failed), [settled(None), finished(stop_reason=StopReason.ERROR)]),
        ],
    )
    outcome = outcome_of(commands)
    assert outcome.http_status == 200 and not outcome.no_answer
    assert outcome.error["message"] == "overloaded"


def test_a_client_gone_mid_response_is_cancelled() -> None:
    play(
        exchange(),
        [
            (frame(EVENTS[0]), []),
            (gone, [CloseUpstream(), settled(None), finished(stop_reason=StopReason.CANCELLED)]),
            (frame(EVENTS[1]), []),  # nothing more is decided once done
        ],
    )


def test_a_client_gone_before_any_frame_is_a_cancelled_request() -> None:
    commands = play(
        exchange(),
        [(gone, [CloseUpstream(), settled(None), finished(stop_reason=StopReason.CANCELLED)])],
    )
    assert outcome_of(commands).left_waiting


def test_a_provider_gone_mid_response_is_interrupted() -> None:
    commands = play(
        exchange(),
        [
            *((frame(text), []) for text in EVENTS[:5]),
            (broke, [AbortClient(), settled(None), finished(stop_reason=StopReason.INTERRUPTED)]),
        ],
    )
    violations = outcome_of(commands).violations
    assert [v.kind for v in violations] == [ViolationKind.STREAM_INTERRUPTED]


def test_an_event_of_a_shape_it_does_not_know_changes_nothing() -> None:
    odd = event(type="response.output_item.added", output_index="zero", item=[1, 2])
    *body, final = EVENTS
    commands = play(
        exchange(),
        [
            (frame(body[0]), []),
            (frame(odd), []),
            *((frame(text), []) for text in body[1:]),
            (frame(final), [settled(1150), finished(stop_reason=StopReason.TOOL_CALLS)]),
        ],
    )
    assert outcome_of(commands).complete
