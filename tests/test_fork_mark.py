"""The fork API's signed header: only the gateway's own mark, for the trace it names, makes a
request's trace a fork; a forged, altered or moved one is ignored."""

from __future__ import annotations

from gateway import ids

SECRET = b"install-secret-for-tests"


def test_the_gateways_mark_names_the_forked_trace_and_step() -> None:
    mark = ids.fork_mark(SECRET, "tr-original", 2, "tr-fork")
    assert ids.read_fork_mark(SECRET, mark, "tr-fork") == ("tr-original", 2)


def test_a_forged_altered_or_moved_mark_is_ignored() -> None:
    mark = ids.fork_mark(SECRET, "tr-original", 2, "tr-fork")
    assert ids.read_fork_mark(b"another-install", mark, "tr-fork") is None
    assert ids.read_fork_mark(SECRET, mark, "tr-another") is None  # not this trace's
    assert ids.read_fork_mark(SECRET, mark.replace(" 2 ", " 3 "), "tr-fork") is None
    for bad in (None, "", "tr-original 2", "tr-original two mac", "a b c d", "<x> 1 mac"):
        assert ids.read_fork_mark(SECRET, bad, "tr-fork") is None
