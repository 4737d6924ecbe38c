"""The one hook system: every sink event states when it fires, and each reaches every sink
that observes it, the same object for all, a raising sink skipped."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.items import StopReason
from gateway.sinks.base import EVENTS, Events, Sink, Sinks
from gateway.step import RefusalRecord, StepRecord

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        self.calls.append(("step_finished", (step, overhead_seconds)))

    def request_refused(self, refusal: RefusalRecord) -> None:
        self.calls.append(("request_refused", (refusal,)))

    def relay_started(self, protocol: str) -> None:
        self.calls.append(("relay_started", (protocol,)))


class Raising:
    def step_finished(self, step: StepRecord, overhead_seconds: float) -> None:
        raise RuntimeError("a broken exporter")


def test_every_event_says_when_it_fires() -> None:
    declared = {
        name: member
        for protocol in (Sink, Events)
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    assert sorted(declared) == sorted(EVENTS)
    for name, member in declared.items():
        assert "Fires" in (inspect.getdoc(member) or ""), name
        assert callable(getattr(Sinks, name)), name


def test_each_event_reaches_the_sinks_that_observe_it(caplog: pytest.LogCaptureFixture) -> None:
    first, second = Seen(), Seen()
    sinks = Sinks([first, Raising(), second])
    step = StepRecord(
        id="s", trace_id="t", protocol="chat", method="POST", path="/", started_at=T0,
        stop_reason=StopReason.COMPLETED,
    )  # fmt: skip
    sinks.step_finished(step, 0.5)
    sinks.relay_started("chat")
    sinks.relay_ended("chat")  # observed by none: nothing happens
    expected = [("step_finished", (step, 0.5)), ("relay_started", ("chat",))]
    assert first.calls == second.calls == expected
    assert first.calls[0][1][0] is second.calls[0][1][0]  # one record, the same for all
    assert "failed on step_finished" in caplog.text
    assert list(sinks.joined(first)) == [first, sinks._sinks[1], second, first]
