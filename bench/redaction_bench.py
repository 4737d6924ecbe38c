"""Redaction speed: µs per 1 KB and per 20 KB of agent text, and per step of an agent run.

Printed: the rules in order over a text first seen (what the recorder pays for a new text),
the same rules as one combined alternation (the single-regex alternative: Python's engine
tries every branch at every position, so it loses), a text seen again (remembered), and a
32-step agent run whose every step carries the whole history so far.
Run: .venv/bin/python bench/redaction_bench.py
"""

from __future__ import annotations

import json
import re
import timeit

from gateway.config import RedactionSettings
from gateway.redaction.redactor import Redactor
from gateway.redaction.rules import TextRule

# Mostly ordinary agent traffic (prose, code, numbers, ids) with a few secrets in it.
PARAGRAPHS = (
    "The build of gpt-4o-2024-08-06 finished at 2024-08-06T12:30:45Z after 1234 steps; "
    "prompt_tokens=5321, completion_tokens=812, latency 3.14159 s, version 1.2.3.\n",
    "def handler(event):\n    items = [x for x in event['records'] if x['size'] > 4096]\n"
    "    return {'count': len(items), 'id': '550e8400-e29b-41d4-a716-446655440000'}\n",
    "Tool call call_M26z19sncd7b4LBgzKRRbaUE returned 200 OK with 17 rows from the orders "
    "table; the next page cursor is 1717171717171 and the total is 98,765.\n",
    "Please e-mail jane.doe@example.com or call +1 (415) 555-2671 about the refund; the "
    "card ending 4242 was charged twice on 01/02/2024.\n",
    "Set OPENAI_API_KEY=sk-proj-abcDEF1234567890ghiJKL and retry with "
    "Authorization: Bearer abc123def456ghi789 in the header.\n",
)


def sample(size: int, offset: int = 0) -> str:
    text = ""
    index = offset
    while len(text) < size:
        text += PARAGRAPHS[index % len(PARAGRAPHS)]
        index += 1
    return text[:size]


def combined(rules: tuple[TextRule, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<r{i}>{rule.pattern.pattern})" for i, rule in enumerate(rules)))


def combined_redact(pattern: re.Pattern[str], rules: tuple[TextRule, ...], text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        rule = rules[int((match.lastgroup or "r0")[1:])]
        if isinstance(rule.replacement, str):
            return rule.replacement
        return rule.replacement(match)

    return pattern.sub(replace, text)


def per_call_us(func: object, number: int) -> float:
    assert callable(func)
    return min(timeit.repeat(func, number=number, repeat=5)) / number * 1e6


def first_sight(redactor: Redactor, redact: object) -> object:
    """`redact` with the redactor's memory emptied before each call."""
    assert callable(redact)

    def call() -> object:
        forget(redactor)
        return redact()

    return call


def forget(redactor: Redactor) -> None:
    """Empty the redactor's memory of texts (a bench measures first sight too)."""
    redactor._texts._results.clear()
    redactor._json_texts._results.clear()


def agent_run(redactor: Redactor, steps: int, remember: bool) -> float:
    """µs per step to redact a run's requests, each repeating the history before it."""
    turns = [sample(600, n) for n in range(steps)]
    results = [json.dumps({"rows": [sample(120, n), n], "ok": True}) for n in range(steps)]

    def run() -> None:
        forget(redactor)
        for step in range(1, steps + 1):
            for turn, result in zip(turns[:step], results[:step], strict=True):
                if not remember:
                    forget(redactor)
                redactor.redact_text(turn)
                redactor.redact_json_text(result)

    return per_call_us(run, 3) / steps


def main() -> None:
    redactor = Redactor(RedactionSettings())
    pattern = combined(redactor.rules)
    for size in (1024, 20 * 1024):
        text = sample(size)
        assert combined_redact(pattern, redactor.rules, text).count("REDACTED") > 0
        cold = per_call_us(first_sight(redactor, lambda text=text: redactor.redact_text(text)), 200)
        single = per_call_us(lambda text=text: combined_redact(pattern, redactor.rules, text), 200)
        warm = per_call_us(lambda text=text: redactor.redact_text(text), 2000)
        print(
            f"{size // 1024:>2} KB text: rules in order {cold:8.1f} µs, one combined regex "
            f"{single:8.1f} µs (ratio {single / cold:.2f}), seen again {warm:6.2f} µs"
        )
    document = json.dumps({"rows": [{"note": sample(200), "api_key": "x"} for _ in range(100)]})
    as_json = per_call_us(first_sight(redactor, lambda: redactor.redact_json_text(document)), 50)
    again = per_call_us(lambda: redactor.redact_json_text(document), 2000)
    print(f"{len(document) // 1024:>2} KB JSON: {as_json:8.1f} µs, seen again {again:6.2f} µs")
    for steps in (8, 32):
        scanned = agent_run(redactor, steps, remember=False)
        remembered = agent_run(redactor, steps, remember=True)
        print(
            f"agent run of {steps} steps, µs per step: every text scanned {scanned:8.1f}, "
            f"texts remembered {remembered:8.1f} (ratio {remembered / scanned:.2f})"
        )


main()
