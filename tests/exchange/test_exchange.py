"""The exchange without sockets: scripted events in, the commands it returns asserted.

Each scenario is a small table, one row per event: what happens, then what the exchange must
answer. `finished(...)` matches a Finished command by the outcome fields it names.
"""

from __future__ import annotations

import gzip
import itertools
import json
from typing import Any

import pytest

from gateway.exchange.machine import (
    TRANSITIONS,
    AbortClient,
    CloseUpstream,
    EndResponse,
    Exchange,
    Forward,
    Phase,
    Settle,
)
from gateway.exchange.stops import RULES, Ending, Seen
from gateway.exchange.tap import MAX_PARSED_BODY
from gateway.items import StopReason, ViolationKind
from gateway.protocols.anthropic.messages import ADAPTER as MESSAGES
from gateway.protocols.openai_chat.completions import ADAPTER
from tests.exchange.playbook import (
    DONE,
    SSE,
    STOP,
    TEXT,
    broke,
    chunk,
    end,
    finished,
    gone,
    head,
    observed,
    outcome_of,
    play,
    receive,
    relayed,
    settled,
    timeout,
)
from tests.factories import load_fixture

TRANSCRIPT: bytes = load_fixture("chat", "stream_parallel_tool_calls.sse")
BODY = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
USAGE_ONLY = chunk(
    {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
)


def test_stream_settles_at_its_marker_and_finishes_before_the_response_ends() -> None:
    body, marker = TRANSCRIPT[: -len(DONE)], DONE
    commands = play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(body), [observed(body)]),
            (receive(marker), [observed(marker), settled(130)]),
            (end, [finished(stop_reason=StopReason.TOOL_CALLS, complete=True), EndResponse()]),
        ],
    )
    outcome = outcome_of(commands)
    assert [item.tool_name for item in outcome.output_items] == ["get_weather", "get_weather"]
    assert outcome.violations == ()


def test_hidden_usage_event_is_the_only_rewrite() -> None:
    exchange = Exchange(ADAPTER, hide_usage_event=True)
    sent = [TEXT, STOP, USAGE_ONLY, DONE]
    commands = play(
        exchange,
        [
            (head(), []),
            # Released per complete event, then decoded once on its way to the client.
            (receive(TEXT + STOP[:7]), [observed(TEXT)]),
            (receive(STOP[7:] + USAGE_ONLY), [observed(STOP)]),  # the usage-only event is held
            (receive(DONE), [observed(DONE), settled(7)]),
            (end, [finished(stop_reason=StopReason.COMPLETED), EndResponse()]),
        ],
    )
    forwarded = b"".join(c.data for c in commands if isinstance(c, Forward))
    assert forwarded == b"".join(sent).replace(USAGE_ONLY, b"")
    assert outcome_of(commands).usage.total_tokens == 7


def test_events_released_to_a_client_that_went_away_are_still_recorded() -> None:
    """Hiding usage, events go out before they are decoded: a client gone in between still
    leaves them in the step's record."""
    exchange = Exchange(ADAPTER, hide_usage_event=True)
    exchange.head(200, content_type=SSE, content_encoding=None, content_length=None)
    assert exchange.receive(TEXT + STOP) == [Forward(TEXT + STOP, observe=True)]
    commands = exchange.client_gone()  # the write failed: `forwarded` never came
    outcome = outcome_of(commands)
    assert outcome.stop_reason is StopReason.CANCELLED  # no completion marker came
    assert [item.text for item in outcome.output_items] == ["yo"]


def test_client_gone_mid_stream_is_cancelled_without_a_violation() -> None:
    play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(TEXT), [observed(TEXT)]),
            (
                gone,
                [CloseUpstream(), settled(None), finished(stop_reason=StopReason.CANCELLED)],
            ),
            (gone, []),  # nothing more is decided once done
        ],
    )


@pytest.mark.parametrize(
    ("event", "ending"), [(broke, Ending.PROVIDER_BROKE), (timeout, Ending.TIMEOUT)]
)
def test_cut_stream_is_interrupted_with_a_violation(event: Any, ending: Ending) -> None:
    commands = play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(TEXT), [observed(TEXT)]),
            (event, [AbortClient(), settled(None), finished(ending=ending)]),
        ],
    )
    outcome = outcome_of(commands)
    assert outcome.stop_reason is StopReason.INTERRUPTED
    assert [v.kind for v in outcome.violations] == [ViolationKind.STREAM_INTERRUPTED]


def test_marker_then_client_gone_keeps_the_providers_stop() -> None:
    play(
        Exchange(ADAPTER),
        [
            (head(), []),
            (receive(TEXT + STOP + DONE), [observed(TEXT + STOP + DONE), settled(None)]),
            (gone, [CloseUpstream(), finished(stop_reason=StopReason.COMPLETED)]),
        ],
    )


def test_body_of_known_length_finishes_before_its_last_bytes() -> None:
    first, last = BODY[:20], BODY[20:]
    play(
        Exchange(ADAPTER),
        [
            (head(content_type="application/json", length=len(BODY)), []),
            (receive(first), [observed(first)]),
            (
                receive(last),
                [
                    settled(4),
                    finished(stop_reason=StopReason.COMPLETED),
                    Forward(last),
                    EndResponse(),
                ],
            ),
            (end, []),  # the transport's end of body changes nothing
        ],
    )


def test_settling_prices_the_answering_model_and_what_else_was_billed() -> None:
    """The budget settles what the record will say: the model that answered, the provider's
    iterations summed and the requests of the tools it ran (streamed and not)."""
    stream = load_fixture("messages", "stream_compaction_web_search.sse")
    commands = play(
        Exchange(MESSAGES),
        [
            (head(), []),
            (receive(stream), [observed(stream), settled(207_500)]),
            (end, [finished(model="claude-opus-4-6"), EndResponse()]),
        ],
    )
    (spent,) = [c for c in commands if isinstance(c, Settle)]
    assert (spent.model, spent.billing.iterations) == ("claude-opus-4-6", 2)
    assert spent.billing.server_tool_requests == {"web_search": 2}
    assert outcome_of(commands).billing == spent.billing
    served = load_fixture("messages", "nonstream_fallback_served.json")["response"]
    answer = json.dumps(served).encode()
    commands = play(
        Exchange(MESSAGES),
        [
            (head(content_type="application/json", length=len(answer)), []),
            (
                receive(answer),
                [
                    settled(3_700),
                    finished(model="claude-sonnet-4-6"),
                    Forward(answer),
                    EndResponse(),
                ],
            ),
        ],
    )
    (spent,) = [c for c in commands if isinstance(c, Settle)]
    assert spent.model == "claude-sonnet-4-6" and len(spent.billing.shares) == 2


def test_body_without_length_is_decoded_at_its_end() -> None:
    play(
        Exchange(ADAPTER),
        [
            (head(content_type="application/json"), []),
            (receive(BODY), [observed(BODY)]),
            (end, [settled(4), finished(stop_reason=StopReason.COMPLETED), EndResponse()]),
        ],
    )


def test_error_status_keeps_the_providers_error() -> None:
    body = json.dumps({"error": {"message": "slow down", "type": "rate", "code": "429"}}).encode()
    commands = play(
        Exchange(ADAPTER),
        [
            (head(429, "application/json", length=len(body)), []),
            (
                receive(body),
                [
                    settled(None),
                    finished(stop_reason=StopReason.ERROR, http_status=429),
                    Forward(body),
                    EndResponse(),
                ],
            ),
        ],
    )
    assert outcome_of(commands).error["message"] == "slow down"


def test_unreachable_provider_is_an_error_step() -> None:
    error = {"message": "timed out", "type": "gateway", "code": "upstream_timeout"}
    play(
        Exchange(ADAPTER),
        [
            (
                lambda x: x.unreachable(504, error),
                [
                    settled(None),
                    finished(stop_reason=StopReason.ERROR, http_status=504, error=error),
                ],
            ),
            (receive(b"late"), []),  # illegal now: noted, ignored
        ],
    )


def test_a_client_gone_before_the_head_is_a_cancelled_step() -> None:
    commands = play(
        Exchange(ADAPTER),
        [
            (
                gone,  # its timeout, a dropped connection: the provider is still working
                [
                    CloseUpstream(),
                    settled(None),
                    finished(stop_reason=StopReason.CANCELLED, http_status=None, violations=()),
                ],
            ),
            (head(), []),  # illegal now: noted, ignored
        ],
    )
    outcome = outcome_of(commands)
    assert outcome.ending is Ending.CLIENT_GONE
    assert outcome.no_answer and outcome.left_waiting  # no answer, yet the provider had it


def test_passthrough_forwards_blind() -> None:
    play(
        Exchange(None),
        [
            (head(200, "application/json"), []),
            (receive(b"{"), [Forward(b"{")]),
            (receive(b"}"), [Forward(b"}")]),
            (
                end,
                [
                    settled(None),
                    finished(stop_reason=StopReason.COMPLETED, violations=()),
                    EndResponse(),
                ],
            ),
        ],
    )
    play(
        Exchange(None),
        [
            (head(200, "application/json"), []),
            (broke, [AbortClient(), settled(None), finished(stop_reason=StopReason.INTERRUPTED)]),
        ],
    )


def test_illegal_events_are_noted_not_raised() -> None:
    exchange = Exchange(ADAPTER)
    assert exchange.receive(b"data: x\n\n") == []  # before the head
    assert exchange.anomalies == ["chunk in phase waiting"]
    assert exchange.phase is Phase.WAITING


def test_gzip_body_is_observed_when_its_last_byte_arrives() -> None:
    raw = gzip.compress(BODY)
    play(
        Exchange(ADAPTER),
        [
            (head(content_type="application/json", encoding="gzip", length=len(raw)), []),
            (receive(raw[:10]), [observed(raw[:10])]),
            (
                receive(raw[10:]),
                [
                    settled(4),
                    finished(stop_reason=StopReason.COMPLETED),
                    Forward(raw[10:]),
                    EndResponse(),
                ],
            ),
        ],
    )


def test_compression_bomb_stops_observing_not_forwarding() -> None:
    bomb = gzip.compress(b"\x00" * (MAX_PARSED_BODY + 1024 * 1024))
    assert len(bomb) < 1024 * 1024  # a small chunk that would expand past the parse limit
    play(
        Exchange(ADAPTER),
        [
            (head(content_type="application/json", encoding="gzip"), []),
            (receive(bomb), [observed(bomb)]),  # the client still gets every byte
            (
                end,
                [
                    settled(None),
                    finished(stop_reason=StopReason.UNKNOWN, violations=()),
                    EndResponse(),
                ],
            ),
        ],
    )


@pytest.mark.parametrize("split", range(1, 40))
def test_every_split_forwards_the_same_bytes(split: int) -> None:
    """Bytes to the client are the provider's, whatever the chunking (usage not hidden)."""
    exchange = Exchange(ADAPTER)
    exchange.head(200, content_type=SSE, content_encoding=None, content_length=None)
    pieces = [TRANSCRIPT[i : i + split * 37] for i in range(0, len(TRANSCRIPT), split * 37)]
    commands = [c for piece in pieces for c in relayed(exchange, exchange.receive(piece))]
    commands += exchange.body_ended()
    assert b"".join(c.data for c in commands if isinstance(c, Forward)) == TRANSCRIPT
    assert outcome_of(commands).stop_reason is StopReason.TOOL_CALLS


def test_the_table_covers_every_reachable_pair() -> None:
    reachable = [
        (seen, ending)
        for seen, ending in itertools.product(Seen, Ending)
        # No head: unreachable, or the client left first. A head: any other ending.
        if (seen is Seen.NOTHING) == (ending is Ending.UNREACHABLE)
        or (seen, ending) == (Seen.NOTHING, Ending.CLIENT_GONE)
    ]
    assert sorted(RULES, key=str) == sorted(reachable, key=str)


def test_done_is_terminal() -> None:
    leaving_done = {
        e for (p, e), nxt in TRANSITIONS.items() if p is Phase.DONE and nxt is not Phase.DONE
    }
    assert leaving_done == set()


def test_a_chunk_reaches_the_client_before_it_is_parsed() -> None:
    exchange = Exchange(ADAPTER)
    exchange.head(200, content_type=SSE, content_encoding=None, content_length=None)
    assert exchange.receive(TEXT + STOP + DONE) == [observed(TEXT + STOP + DONE)]
    assert exchange.phase is Phase.RECEIVING  # nothing parsed yet: the marker is unseen
    assert [type(c) for c in exchange.forwarded(TEXT + STOP + DONE)] == [Settle]
    assert exchange.phase is Phase.MARKED
