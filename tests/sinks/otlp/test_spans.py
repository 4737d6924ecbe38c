"""A step's span names the model asked for and the one that answered apart, as the GenAI
conventions do (`gen_ai.request.model`, `gen_ai.response.model`)."""

from __future__ import annotations

from gateway.items import StopReason
from gateway.routing import Provider
from gateway.sinks.otlp.spans import step_span
from tests.factories import build_step

ANTHROPIC = Provider("anthropic", "api.anthropic.com", 443)


def test_a_step_a_fallback_model_answered_names_both_models() -> None:
    step = build_step(
        protocol="messages",
        path="/v1/messages",
        model="claude-sonnet-4-6",
        http_status=200,
        stop_reason=StopReason.COMPLETED,
        attrs={"requested_model": "claude-opus-4-6", "iterations": 2},
    )
    span = step_span(step, ANTHROPIC)
    assert span.name == "chat claude-opus-4-6"  # named by the request, as the conventions say
    assert span.attributes["gen_ai.request.model"] == "claude-opus-4-6"
    assert span.attributes["gen_ai.response.model"] == "claude-sonnet-4-6"


def test_a_step_answered_by_the_model_it_asked_for_names_it_twice() -> None:
    step = build_step(protocol="messages", path="/v1/messages", model="claude-sonnet-4-6")
    span = step_span(step, ANTHROPIC)
    assert span.name == "chat claude-sonnet-4-6"
    assert span.attributes["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert span.attributes["gen_ai.response.model"] == "claude-sonnet-4-6"
