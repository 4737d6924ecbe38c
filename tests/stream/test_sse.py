"""SSE decoder: every split point, every line ending, exact raw bytes, hostile sizes."""

from __future__ import annotations

import pytest

from gateway.stream.sse import SSEDecoder, SSEEvent
from tests.factories import fixture_names, load_fixture

STREAMS = fixture_names("chat", "*.sse")
# Line-ending variants on a few shapes keep the every-split runs quick.
ENDING_STREAMS = [
    "stream_openrouter_error.sse",
    "stream_text.sse",
    "stream_qwen_empty_ids.sse",
    "stream_llamacpp_no_done.sse",
]


def _decode_all(*chunks: bytes, **options: int | bool) -> tuple[list[SSEEvent], bytes]:
    decoder = SSEDecoder(**options)  # type: ignore[arg-type]
    events = [event for chunk in chunks for event in decoder.decode(chunk)]
    events += decoder.flush()
    return events, decoder.pending_raw


def _fields(events: list[SSEEvent]) -> list[tuple[str | None, str, str | None]]:
    return [(e.event, e.data, e.id) for e in events]


def _variant(transcript: bytes, ending: bytes) -> bytes:
    return transcript.replace(b"\n", ending)


@pytest.mark.parametrize(
    ("name", "ending"),
    [(name, b"\n") for name in STREAMS]
    + [(name, ending) for name in ENDING_STREAMS for ending in (b"\r\n", b"\r")],
)
def test_every_two_chunk_split_gives_the_same_events(name: str, ending: bytes) -> None:
    transcript = _variant(load_fixture("chat", name), ending)
    whole, rest = _decode_all(transcript)
    assert whole and rest == b""
    assert b"".join(e.raw for e in whole) == transcript
    expected = _fields(whole)
    for cut in range(len(transcript) + 1):
        events, rest = _decode_all(transcript[:cut], transcript[cut:])
        assert _fields(events) == expected, f"split at {cut}"
        assert [e.raw for e in events] == [e.raw for e in whole], f"split at {cut}"


@pytest.mark.parametrize("name", STREAMS)
def test_byte_at_a_time_gives_the_same_events(name: str) -> None:
    transcript = _variant(load_fixture("chat", name), b"\r\n")
    whole, _ = _decode_all(transcript)
    events, _ = _decode_all(*(transcript[i : i + 1] for i in range(len(transcript))))
    assert events == whole


def test_data_events_match_the_transcript() -> None:
    events, _ = _decode_all(load_fixture("chat", "stream_parallel_tool_calls.sse"))
    assert events[-1].data == "[DONE]"
    assert all(e.event is None for e in events)
    assert all(e.data.startswith("{") for e in events[:-1])


def test_comment_blocks_ride_with_the_next_event() -> None:
    transcript = load_fixture("chat", "stream_openrouter_error.sse")
    events, _ = _decode_all(transcript)
    assert events[0].raw.startswith(b": OPENROUTER PROCESSING\n\n" * 5 + b"data: {")
    assert all(": OPENROUTER" not in e.data for e in events)


def test_dispatch_empty_hands_out_keepalives() -> None:
    events, _ = _decode_all(b": ping\n\ndata: x\n\n", dispatch_empty=True)
    assert [(e.data, e.raw) for e in events] == [("", b": ping\n\n"), ("x", b"data: x\n\n")]


def test_split_inside_a_multibyte_character() -> None:
    transcript = 'data: {"content":"ça 🙂"}\n\n'.encode()
    emoji_at = transcript.index("🙂".encode())
    for cut in range(emoji_at, emoji_at + 5):
        events, _ = _decode_all(transcript[:cut], transcript[cut:])
        assert [e.data for e in events] == ['{"content":"ça 🙂"}']


def test_split_between_cr_and_lf_is_one_line_ending() -> None:
    events, _ = _decode_all(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n")
    assert [e.data for e in events] == ["a", "b"]
    assert [e.raw for e in events] == [b"data: a\r\n\r\n", b"data: b\r\n\r\n"]


def test_fields_multiline_data_and_spaces() -> None:
    transcript = (
        b": comment\n"
        b"event: message_delta\n"
        b"id: 7\n"
        b"data:no space\n"
        b"data:  two spaces  \n"
        b"data\n"
        b"retry: 100\n"
        b"unknown: x\n"
        b"\n"
    )
    (event,), _ = _decode_all(transcript)
    assert event.event == "message_delta"
    assert event.id == "7"
    # One leading space is the separator; the rest, and trailing padding, is data.
    assert event.data == "no space\n two spaces  \n"
    assert event.raw == transcript


def test_block_without_data_is_not_dispatched() -> None:
    events, rest = _decode_all(b"event: ping\n\nid: 3\n\n")
    assert events == [] and rest == b"event: ping\n\nid: 3\n\n"


def test_byte_order_mark_is_ignored_but_kept_in_raw() -> None:
    (event,), _ = _decode_all(b"\xef\xbb\xbfdata: x\n\n")
    assert event.data == "x"
    assert event.raw == b"\xef\xbb\xbfdata: x\n\n"


def test_flush_returns_an_unterminated_event_with_data() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: [DONE]") == []
    assert decoder.pending_raw == b"data: [DONE]"
    (event,) = decoder.flush()
    assert (event.data, event.raw) == ("[DONE]", b"data: [DONE]")
    assert decoder.pending_raw == b""


def test_flush_keeps_leftover_without_data() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\n\n: trailing comment\r") != []
    assert decoder.flush() == []
    assert decoder.pending_raw == b": trailing comment\r"


def test_cut_mid_event_is_flushed_with_partial_data() -> None:
    transcript = load_fixture("chat", "stream_text.sse")
    cut = transcript.index(b"data:", 300) + 40
    events, rest = _decode_all(transcript[:cut])
    assert rest == b""
    assert b"".join(e.raw for e in events) == transcript[:cut]
    assert events[-1].data.startswith("{") and not events[-1].data.endswith("}")


def test_oversized_event_is_dropped_in_pieces_and_bytes_still_add_up() -> None:
    big = b"data: " + b"x" * 5000 + b"\n" + b"data: " + b"y" * 5000 + b"\n\n"
    transcript = b"data: small\n\n" + big + b"data: after\n\n"
    chunks = [transcript[i : i + 700] for i in range(0, len(transcript), 700)]
    decoder = SSEDecoder(max_event_bytes=2048)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += decoder.decode(chunk)
        assert len(decoder.pending_raw) <= 2048 + 700  # memory stays bounded
    events += decoder.flush()
    assert b"".join(e.raw for e in events) == transcript
    assert events[0].data == "small" and events[-1].data == "after"
    middle = events[1:-1]
    assert len(middle) > 1 and all(e.oversized and e.data == "" for e in middle)
    assert not events[0].oversized and not events[-1].oversized


def test_oversized_event_in_a_single_chunk() -> None:
    transcript = b"data: " + b"z" * 3000 + b"\n\ndata: ok\n\n"
    events, _ = _decode_all(transcript, max_event_bytes=1000)
    assert [(e.oversized, e.data) for e in events] == [(True, ""), (False, "ok")]
    assert b"".join(e.raw for e in events) == transcript


def test_oversized_line_without_terminator_at_flush() -> None:
    transcript = b"data: " + b"q" * 4000
    events, rest = _decode_all(transcript[:2000], transcript[2000:], max_event_bytes=1000)
    assert all(e.oversized for e in events)
    assert b"".join(e.raw for e in events) + rest == transcript


MIXED = (
    b"data: first\n\n"
    b": keep-alive\n\n"
    b"data: after a comment\n\n"
    b"event: named\ndata: one\n\n"
    b"data:no space\n\n"
    b"data:\n\n"
    b"id: 7\n\n"
    b"data: two\ndata: lines\n\n"
    b"data: " + b"o" * 300 + b"\n\n"
    b"data: caf\xc3\xa9\n\n"
    b"data: crlf\r\n\r\n"
    b"data: last\n\n"
)


@pytest.mark.parametrize("group", [1, 2, 3])
def test_chunks_of_whole_events_give_the_same_events(group: int) -> None:
    """Chunks that end where an event does (most of a real stream) are read by a quicker
    path: the same events and bytes as one byte at a time, whatever precedes them."""
    blocks = [block + b"\n\n" for block in MIXED.split(b"\n\n")[:-1]]
    chunks = [b"".join(blocks[i : i + group]) for i in range(0, len(blocks), group)]
    bytewise = [MIXED[i : i + 1] for i in range(len(MIXED))]
    expected, _ = _decode_all(*bytewise)
    events, rest = _decode_all(*chunks)
    assert events == expected and rest == b""
    # An oversized event comes in pieces that depend on the chunks; the rest does not.
    expected, _ = _decode_all(*bytewise, max_event_bytes=100)
    events, rest = _decode_all(*chunks, max_event_bytes=100)
    assert _fields([e for e in events if not e.oversized]) == _fields(
        [e for e in expected if not e.oversized]
    )
    assert b"".join(e.raw for e in events) == MIXED and rest == b""
