"""What the metrics read at scrape time rather than per step: the recorder's own counters
and batch durations, and the traces that went idle with tool calls open.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.runs.abandonment import AbandonWatch
from gateway.sinks.instruments import Instruments

OPEN_TRACES = 10_000  # traces kept in memory per watch, least recent evicted


class RecorderGauges(Protocol):
    """What the metrics read from the recorder at scrape time."""

    @property
    def queue_depth(self) -> int: ...

    @property
    def dropped_total(self) -> int: ...

    @property
    def write_errors_total(self) -> int: ...

    @property
    def wakeups_total(self) -> int: ...

    def new_batches(self) -> list[float]:
        """Durations of the store batches written since the last call."""
        ...


class RecorderCollector(Collector):
    """Reads the recorder's own counters at scrape time (zeros until one is attached)."""

    def __init__(self) -> None:
        self.recorder: RecorderGauges | None = None

    def collect(self) -> Iterable[Metric]:
        rec = self.recorder
        yield GaugeMetricFamily(
            "loopwatch_recorder_queue_depth",
            "Records waiting to be written to the store.",
            value=rec.queue_depth if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_dropped",
            "Records lost: queue full, unwritable, or still queued at shutdown.",
            value=rec.dropped_total if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_write_errors",
            "Failed store writes (each retried or isolated).",
            value=rec.write_errors_total if rec else 0,
        )
        yield CounterMetricFamily(
            "loopwatch_recorder_wakeups",
            "Times the recorder woke to read the spool (it sleeps until a record comes).",
            value=rec.wakeups_total if rec else 0,
        )


class ScrapeTime:
    """Brings the scrape-time instruments up to date just before an exposition."""

    def __init__(self, instruments: Instruments, idle_seconds: float) -> None:
        self._instruments = instruments
        # Traces that may end abandoned, judged at each scrape by the status every surface uses.
        self.watch = AbandonWatch(idle_seconds, OPEN_TRACES)
        self.recorder = RecorderCollector()
        instruments.registry.register(self.recorder)

    def count_abandoned(self, now: datetime | None = None) -> None:
        """Traces idle past the threshold with tool calls unanswered: counted once each."""
        count = self.watch.abandoned(now or datetime.now(UTC))
        if count:
            self._instruments.abandoned.inc(count)

    def collect(self) -> None:
        self.count_abandoned()
        recorder = self.recorder.recorder
        if recorder is not None:  # batches are written by the recorder, maybe in its process
            for seconds in recorder.new_batches():
                self._instruments.batch_seconds.observe(seconds)
