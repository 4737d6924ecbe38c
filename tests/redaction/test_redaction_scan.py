"""The scan's shortcuts change no output: the bearer rule's fast spelling matches what its
plain spelling matches, and a remembered text is redacted as a first scan redacts it."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import RedactionPattern, RedactionSettings
from gateway.redaction import memo
from gateway.redaction.redactor import Redactor
from gateway.redaction.rules import BUILTIN_RULES

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The bearer rule as it reads in words: the word in three spellings, then the token.
PLAIN_BEARER = re.compile(
    r"(?:[Bb]earer|BEARER)(?<![A-Za-z0-9]......)[ \t]+"
    r"(?:(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}|[A-Za-z0-9._~+/-]{20,})=*"
)
WORDS = ["Bearer", "bearer", "BEARER", "BeArer", "bEARER", "Bearer:", "xBearer", "1bearer"]
around_bearer = st.lists(
    st.one_of(
        st.sampled_from(WORDS),
        st.text(alphabet="Bb eEaArR0123456789._~+/-=\t:xA", max_size=12),
    ),
    max_size=8,
).map("".join)


@FUZZ
@given(text=around_bearer)
def test_the_bearer_rule_matches_as_its_plain_spelling(text: str) -> None:
    [bearer] = [rule for rule in BUILTIN_RULES if rule.kind == "bearer"]
    assert bearer.pattern.sub("<>", text) == PLAIN_BEARER.sub("<>", text)


agent_text = st.lists(
    st.sampled_from(
        [
            "Authorization: Bearer abc123def456ghi789 ",
            "sk-proj-Xa81bQ_fN3k2LmZp9Rt4uVw7yC6dE5gH1iJ0",
            "jane.doe@example.com ",
            "+1 (415) 555-2671 ",
            "4242 4242 4242 4242 ",
            "the build finished at 2024-08-06T12:30:45Z after 1234 steps; ",
            '{"api_key": "x", "rows": [1, 2, 3], "note": "call 415-555-2671"}',
            "tok_live_123 ",
            "\n",
        ]
    ),
    min_size=1,
    max_size=12,
).map("".join)


@FUZZ
@given(texts=st.lists(agent_text, min_size=1, max_size=6))
def test_a_remembered_text_is_redacted_as_a_first_scan_redacts_it(texts: list[str]) -> None:
    custom = [RedactionPattern(name="token", regex=r"tok_live_\d+")]
    settings_ = RedactionSettings(patterns=custom, json_keys=["api_key"])
    remembering = Redactor(settings_)
    for text in [*texts, *texts]:  # each seen twice
        fresh = Redactor(settings_)
        assert remembering.redact_text(text) == fresh.redact_text(text)
        assert remembering.redact_json_text(text) == fresh.redact_json_text(text)


def test_the_memory_forgets_everything_past_its_budget() -> None:
    scans: list[str] = []

    def scan(text: str) -> str:
        scans.append(text)
        return text.upper()

    remember = memo.Memo(scan, budget_chars=3 * 100)
    texts = [f"{n}" * 100 for n in range(3)]  # 100 characters each, held twice (changed)
    assert [remember(t) for t in texts] == [t.upper() for t in texts]
    assert remember(texts[2]) == texts[2].upper() and len(scans) == 3  # remembered
    assert remember(texts[0]) == texts[0].upper() and len(scans) == 4  # forgotten, scanned
    assert remember("short") == "SHORT" and remember("short") == "SHORT"
    assert scans[-2:] == ["short", "short"]  # below MIN_CHARS: always scanned


def test_json_keys_stay_redacted_when_the_text_is_remembered() -> None:
    redactor = Redactor(RedactionSettings())
    document = json.dumps({"api_key": "sk-live-abcdef", "note": "x" * 80})
    first = redactor.redact_json_text(document)
    assert "sk-live" not in first and redactor.redact_json_text(document) == first
