"""Repeated tool calls: canonical forms, the per-trace counter, the refusal decision."""

from __future__ import annotations

from functools import partial

import pytest

from gateway.checks.loops import (
    CallCounter,
    call_key,
    canonical_arguments,
    canonical_call,
    loop_refusal,
)
from gateway.config_load import load_settings
from gateway.errors import ConfigError, RepeatedToolCall
from gateway.items import Item, ItemKind, ViolationKind
from gateway.protocols.anthropic.messages import ADAPTER as MESSAGES
from gateway.protocols.openai_chat.completions import ADAPTER as CHAT
from tests.factories import tool_call, tool_result

# The tool these loops repeat.
search_call = partial(tool_call, name="search")


def test_canonical_form_ignores_key_order_and_spacing() -> None:
    assert canonical_arguments('{ "b": 1, "a": {"d": [1, 2], "c": null} }') == (
        '{"a":{"c":null,"d":[1,2]},"b":1}'
    )
    assert call_key("s", '{"q": "x", "n": 1}') == call_key("s", '{"n":1,"q":"x"}')
    assert call_key("s", "") == call_key("s", None) == call_key("s", "{}")
    assert call_key("s", '{"q": "x"}') != call_key("t", '{"q": "x"}')
    assert call_key("s", '{"q": "x"}') != call_key("s", '{"q": "y"}')
    assert canonical_arguments('{"q": "é"}') == '{"q":"é"}'
    # Unparseable arguments count by their trimmed text; names never run into arguments.
    assert canonical_arguments('  {"q": ') == '"{\\"q\\":"'
    assert canonical_call('a"', "{}") != canonical_call("a", '"{}')


def test_the_threshold_call_is_a_violation_once() -> None:
    counter = CallCounter(threshold=3)
    assert counter.observe([search_call('{"q": "x"}', call_id="c1")]) == []
    assert (
        counter.observe([search_call('{"q":"x"}', call_id="c2"), search_call('{"q": "y"}')]) == []
    )
    assert counter.loop is None
    [violation] = counter.observe([search_call('{ "q" : "x" }', call_id="c3")])
    assert violation.kind is ViolationKind.REPEATED_TOOL_CALL
    assert violation.call_id == "c3" and not violation.enforced
    assert "'search' (c3)" in violation.detail
    assert 'made 2 time(s) before in this trace with the same arguments {"q":"x"}' in (
        violation.detail
    )
    assert counter.loop is not None and counter.loop.count == 3
    assert counter.observe([search_call('{"q": "x"}', call_id="c4")]) == []  # said once
    assert counter.count("search", '{"q":"x"}') == 4


def test_parallel_repeats_in_one_step_count() -> None:
    counter = CallCounter(threshold=2)
    found = counter.observe([search_call("{}", call_id="a"), search_call("", call_id="b")])
    assert [v.call_id for v in found] == ["b"]


def test_calls_the_agent_will_not_run_are_not_counted() -> None:
    counter = CallCounter(threshold=2)
    text = Item(ItemKind.ASSISTANT_TEXT, text="search", tool_name="search")
    others = [
        search_call("{}", choice=1),
        search_call("{}", incomplete=True),
        search_call("{}", name=""),
        text,
    ]
    assert counter.observe(others + others) == []
    assert counter.count("search", "{}") == 0


def test_calls_the_provider_ran_count_like_the_agents() -> None:
    """A model that has the provider search the same query again and again is looping too;
    the provider's results, like the agent's, are no calls."""
    counter = CallCounter(threshold=2)
    ran = partial(search_call, executed_by="provider", tool_type="web_search")
    result = tool_result("s1", text="ESA launches probe", executed_by="provider")
    assert counter.observe([ran('{"query": "ESA"}', call_id="s1"), result]) == []
    [violation] = counter.observe([ran('{"query":"ESA"}', call_id="s2")])
    assert violation.call_id == "s2" and "'search' (s2)" in violation.detail
    assert counter.loop is not None and counter.loop.count == 2


def test_distinct_calls_are_bounded_least_recent_first() -> None:
    counter = CallCounter(threshold=2, max_distinct=3)
    counter.observe([search_call('{"n": 0}')])
    for n in range(1, 4):
        counter.observe([search_call(f'{{"n": {n}}}')])
    assert counter.count("search", '{"n": 0}') == 0  # forgotten
    assert [counter.count("search", f'{{"n": {n}}}') for n in (1, 2, 3)] == [1, 1, 1]


def test_deep_arguments_never_raise() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    counter = CallCounter(threshold=2)
    assert len(counter.observe([search_call(deep), search_call(deep)])) == 1


def test_a_threshold_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        CallCounter(threshold=1)
    with pytest.raises(ConfigError, match=r"loop_threshold \(LOOPWATCH_LOOP_THRESHOLD\)"):
        load_settings({}, {"LOOPWATCH_LOOP_THRESHOLD": "1"})
    with pytest.raises(ConfigError, match=r"loops \(LOOPWATCH_LOOPS\)"):
        load_settings({}, {"LOOPWATCH_LOOPS": "block"})
    settings = load_settings({}, {})
    assert (settings.loop_threshold, settings.loops) == (3, "observe")
    enforced = load_settings({}, {"LOOPWATCH_LOOPS": "enforce", "LOOPWATCH_LOOP_THRESHOLD": "5"})
    assert (enforced.loop_threshold, enforced.loops) == (5, "enforce")


def test_refusal_only_under_enforce_after_a_loop() -> None:
    counter = CallCounter(threshold=2)
    assert loop_refusal(counter.loop, "enforce") is None
    counter.observe(
        [search_call('{"q": "x"}', call_id="c1"), search_call('{"q": "x"}', call_id="c2")]
    )
    assert loop_refusal(counter.loop, "observe") is None
    refused = loop_refusal(counter.loop, "enforce")
    assert refused is not None
    error, violation = refused
    assert isinstance(error, RepeatedToolCall)
    assert (error.status, error.code, error.headers["x-should-retry"]) == (
        429,
        "repeated_tool_call",
        "false",
    )
    assert violation.kind is ViolationKind.REPEATED_TOOL_CALL and violation.enforced
    assert violation.call_id == "c2"
    assert "'search' was called 2 times with the same arguments" in error.message
    # Answered in the client's protocol, like a spent budget.
    assert CHAT.error_body(error)["error"]["code"] == "repeated_tool_call"
    body = MESSAGES.error_body(error)["error"]
    assert body["type"] == "rate_limit_error" and body["message"].startswith("repeated_tool_call")
