"""Redacted texts remembered by their content: an agent sends its whole history with every
step, so the recorder meets each tool result and message again at every later step.

Redaction is a pure function of the text (and the settings, fixed per Redactor), so a
remembered result is exactly the one a new scan would give. Bounded by characters held.
"""

from __future__ import annotations

from collections.abc import Callable

# Shorter texts are scanned again: the lookup would cost about what the scan does. Ids,
# tool and model names are longer and usually hold a digit, which sends the scan through
# every digit rule: remembering them halves the redaction of a typical step.
MIN_CHARS = 16
# Longer ones are rare and would crowd out the rest.
MAX_CHARS = 64 * 1024
BUDGET_CHARS = 4 * 1024 * 1024  # about 4-16 MB held at most, then forgotten at once


class Memo:
    """Results of `compute` by text. Safe across threads: only single dict operations
    (each atomic), and forgetting everything at once needs no order kept."""

    def __init__(self, compute: Callable[[str], str], budget_chars: int = BUDGET_CHARS) -> None:
        self._compute = compute
        self._budget = budget_chars
        self._held = 0
        self._results: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        size = len(text)
        if size < MIN_CHARS or size > MAX_CHARS:
            return self._compute(text)
        found = self._results.get(text)
        if found is not None:
            return found
        result = self._compute(text)
        # An unchanged text is held once (the key is the value).
        self._held += size + (0 if result is text else len(result))
        if self._held > self._budget:
            self._results.clear()
            self._held = size + (0 if result is text else len(result))
        self._results[text] = result
        return result
