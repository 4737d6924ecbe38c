"""A replay's refusal as the test's failure shows it: the one-line summary, then the diff,
read from each protocol's error shape."""

from __future__ import annotations

import json

import pytest

from gateway.errors import ReplayDiverged
from gateway.protocols.registry import ADAPTERS
from gateway.testing.divergences import _described

SUMMARY = 'replay diverged at step 2, new item 0: tool_result "a" → tool_result "b"'
DIFF = {"step": 2, "item": 0, "recorded": {"text": "a"}, "received": {"text": "b"}}


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
def test_the_summary_then_the_diff_in_every_protocol(protocol: str) -> None:
    body = ADAPTERS[protocol].error_body(ReplayDiverged(SUMMARY, diff=DIFF))

    described = _described(json.dumps(body).encode())

    first, second, *rest = described.splitlines()
    assert first.endswith(SUMMARY)  # a protocol may name the error's code before it
    assert second == "diff:"
    assert json.loads("\n".join(rest)) == DIFF


def test_a_body_without_a_diff_is_shown_whole() -> None:
    assert _described(b"upstream said no") == "upstream said no"
    assert _described(b'{"error": "no"}') == '{"error": "no"}'
