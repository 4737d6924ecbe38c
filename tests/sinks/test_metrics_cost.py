"""Cost and tool-time instruments, fed by finished steps and read back in the text format."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.sinks.metrics import MetricsSink
from tests.factories import bare_step


def samples(sink: MetricsSink) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = sink.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def finished(sink: MetricsSink, model: str, cost_nano: int | None, tool_ms: float | None) -> None:
    step = bare_step(model=model, cost_nano=cost_nano, tool_ms=tool_ms)
    sink.step_finished(step, 0.0)


def test_cost_is_counted_per_model_and_unknown_costs_are_not() -> None:
    sink = MetricsSink(max_models=1)
    finished(sink, "gpt-4o", 4_500_000, None)
    finished(sink, "gpt-4o", 500_000, None)
    finished(sink, "gpt-4o", None, None)  # unknown price: no guess
    finished(sink, "claude-sonnet-4-5", 250_000_000, None)  # past max_models
    found = samples(sink)
    assert found[("loopwatch_cost_usd_total", (("model", "gpt-4o"),))] == pytest.approx(0.005)
    assert found[("loopwatch_cost_usd_total", (("model", "other"),))] == 0.25
    assert found[("loopwatch_tool_seconds_count", ())] == 0


def test_tool_time_is_a_histogram_in_seconds() -> None:
    sink = MetricsSink()
    for tool_ms in (40.0, 1500.0, 90_000.0, None, -5.0):
        finished(sink, "gpt-4o", None, tool_ms)
    found = samples(sink)
    assert found[("loopwatch_tool_seconds_count", ())] == 3
    assert found[("loopwatch_tool_seconds_sum", ())] == pytest.approx(91.54)
    assert found[("loopwatch_tool_seconds_bucket", (("le", "0.05"),))] == 1
    assert found[("loopwatch_tool_seconds_bucket", (("le", "2.5"),))] == 2
    assert found[("loopwatch_tool_seconds_bucket", (("le", "120.0"),))] == 3


def test_cost_and_time_budget_refusals_exist_before_any() -> None:
    found = samples(MetricsSink())
    for budget in ("steps", "tokens", "cost", "time"):
        assert found[("loopwatch_budget_refusals_total", (("budget", budget),))] == 0
    for kind in ("undeclared_tool", "repeated_tool_call", "cost_budget_exceeded"):
        assert found[("loopwatch_violations_total", (("kind", kind),))] == 0
