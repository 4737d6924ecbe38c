"""`jsoncodec.canonical` is the standard library's canonical text, byte for byte: continuation
keys and loop counts are hashes of it, and keys stored by an earlier release must still match."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.jsoncodec import canonical

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)


def _standard(text: str, ensure_ascii: bool) -> Any:
    try:
        value = json.loads(text)
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)
    except (ValueError, RecursionError) as exc:
        return type(exc)


def _ours(text: str, ensure_ascii: bool) -> Any:
    try:
        return canonical(text, ensure_ascii=ensure_ascii)
    except (ValueError, RecursionError) as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(_VALUES, st.booleans(), st.booleans())
def test_any_json_value_gives_the_standard_librarys_text(
    value: Any, ensure_ascii: bool, spaced: bool
) -> None:
    text = json.dumps(value, indent=2 if spaced else None, ensure_ascii=not ensure_ascii)
    assert _ours(text, ensure_ascii) == _standard(text, ensure_ascii)


@pytest.mark.parametrize(
    "text",
    [
        '{"days": 3, "city": "Lyon", "hourly": false}',
        '{"ratio": 1e16, "small": 1E-7, "x": -0.0, "n": -0}',  # floats the two write apart
        '{"a": 1, "a": 2}',  # a repeated key: the last one counts
        '{"\\u00e9": "caf\\u00e9", "z": "\\u2028", "\\ud83d\\ude00": 1, "del": "\\u007f"}',
        '{"big": 123456789012345678901234567890}',  # past 64 bits
        "[NaN, Infinity]",  # read by the standard library only
        '"\\ud800"',  # a lone surrogate
        '{"a": 1',  # not JSON
        "[" * 5000 + "]" * 5000,  # deeper than either reads
    ],
)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_edge_cases_give_the_standard_librarys_text_or_error(text: str, ensure_ascii: bool) -> None:
    assert _ours(text, ensure_ascii) == _standard(text, ensure_ascii)
