"""The tool time a step's record carries: from its trace's previous response end here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.proxy.response_ends import ResponseEnds

T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)


def test_tool_time_runs_from_the_previous_response_end_to_the_request() -> None:
    ends = ResponseEnds()
    assert ends.tool_ms("t", T0, T0 + timedelta(seconds=2)) is None  # its first step here
    second = T0 + timedelta(seconds=5)
    assert ends.tool_ms("t", second, second + timedelta(seconds=1)) == 3000.0
    # A request sent before the previous response ended (parallel calls): no negative time.
    assert ends.tool_ms("t", second, second) == 0.0
    assert ends.tool_ms("other", second, second) is None


def test_the_least_recent_trace_is_forgotten_past_the_limit() -> None:
    ends = ResponseEnds(limit=2)
    for trace in ("a", "b", "c"):
        ends.tool_ms(trace, T0, T0)
    later = T0 + timedelta(seconds=1)
    assert ends.tool_ms("a", later, later) is None
    assert ends.tool_ms("c", later, later) == 1000.0
