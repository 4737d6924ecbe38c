"""Redaction of everything the gateway stores: secrets and personal data become markers.

Rules are compiled once per Redactor; what is forwarded to the client is never touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from gateway import jsoncodec
from gateway.config import RedactionSettings
from gateway.items import Item, ItemKind, Violation
from gateway.step import RefusalRecord, StepRecord

Replacement = str | Callable[[re.Match[str]], str]

# Pre-cutting a huge text before redaction keeps a 1 MB tool result from holding the GIL
# for long; cutting at a line break is safe because no built-in rule spans lines.
_PRECUT_FACTOR = 4


@dataclass(frozen=True, slots=True)
class TextRule:
    """One text rule; `hints` are literals of which one must occur for a match to exist."""

    kind: str
    pattern: re.Pattern[str]
    replacement: Replacement
    hints: tuple[str, ...] = ()

    def apply(self, text: str) -> str:
        # A plain substring test is far cheaper than a regex scan that finds nothing.
        if self.hints:
            for hint in self.hints:
                if hint in text:
                    break
            else:
                return text
        return self.pattern.sub(self.replacement, text)


# An e-mail address is found from its "@": scanning for local parts at every word would
# cost a regex attempt per character.
_EMAIL_DOMAIN = re.compile(
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-])"
)
_EMAIL_LOCAL = re.compile(r"(?<![\w.%+-])[\w.%+-]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class EmailRule(TextRule):
    """`pattern` is the whole address; `apply` finds the domain, then its local part."""

    def apply(self, text: str) -> str:
        if "@" not in text:
            return text
        pieces: list[str] = []
        done = 0
        for domain in _EMAIL_DOMAIN.finditer(text):
            at = domain.start()
            local = _EMAIL_LOCAL.search(text, max(done, at - 64), at)
            if local is None:
                continue
            pieces += (text[done : local.start()], marker(self.kind))
            done = domain.end()
        return "".join(pieces) + text[done:] if pieces else text


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = "".join(char for char in match.group() if char.isdigit())
    return marker("card") if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(char.isdigit() for char in text)
    # E.164 allows at most 15 digits; national forms need 9 so that d-m-yyyy dates stay.
    low = 8 if text[0] == "+" else 9
    return marker("phone") if low <= digits <= 15 else text


# Each pattern opens with a literal or a small character set, and lookbehinds come after
# it ("sk-(?<!…)"): the regex engine then skips ahead in C instead of trying every position.
_BUILTIN_RULES = (
    # sk-ant-…, sk-proj-… and legacy sk-… are one rule; "task-sk-<key>" is still redacted
    # because keys are often glued to a name with a hyphen, but "tasksk-…" is a word.
    TextRule(
        "api_key",
        re.compile(r"sk-(?<![A-Za-z0-9]sk-)(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        marker("api_key"),
        ("sk-",),
    ),
    TextRule(
        "aws_key",
        re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        marker("aws_key"),
        ("AKIA", "ASIA"),
    ),
    TextRule(
        "github_token",
        re.compile(r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"),
        marker("github_token"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    TextRule(
        "jwt",
        re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        marker("jwt"),
        ("eyJ",),
    ),
    # A token needs a digit or 20+ characters, so prose such as "bearer of" stays.
    TextRule(
        "bearer",
        re.compile(
            r"(?:[Bb]earer|BEARER)(?<![A-Za-z0-9]......)[ \t]+"
            r"(?:(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}|[A-Za-z0-9._~+/-]{20,})=*"
        ),
        "Bearer " + marker("bearer"),
        ("earer", "EARER"),
    ),
    EmailRule(
        "email",
        re.compile(r"(?<![\w.%+-])[\w.%+-]{1,64}" + _EMAIL_DOMAIN.pattern),
        marker("email"),
        ("@",),
    ),
    # Card numbers start with 2-6 (the issuer ranges in use), so millisecond timestamps
    # and snowflake ids, which start with 1, are never candidates; Luhn does the rest.
    TextRule(
        "card",
        re.compile(r"[2-6](?<![\w+.,-][2-6])\d{3}(?:[ -]?\d){9,15}(?![\w-]|[.,]\d)"),
        _card,
    ),
    # Only "+" forms, US forms with one consistent separator (area code and exchange start
    # 2-9, as the numbering plan requires) and trunk-prefixed national forms (0…) are
    # phones: bare digit runs (years, ids, counts, timestamps) never are.
    TextRule(
        "phone",
        re.compile(
            r"\+(?<![\w+.:/-]\+)[1-9]\d{0,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,5}"
            r"(?![\w:-]|[.,]\d)"
        ),
        _phone,
        ("+",),
    ),
    TextRule(
        "phone",
        re.compile(
            r"[(\d](?<![\w+.:/-][(\d])(?:(?<=\()\d{3}\)[ ]?\d{3}[-. ]\d{4}"
            r"|(?<=\d)(?:[ .-]?\(\d{3}\)[ ]?\d{3}[-. ]\d{4}"
            r"|(?<=1)[ .-][2-9]\d{2}(?P<sep1>[-. ])[2-9]\d{2}(?P=sep1)\d{4}"
            r"|(?<=[2-9])\d{2}(?P<sep>[-. ])[2-9]\d{2}(?P=sep)\d{4}"
            r"|(?<=0)\d{1,4}(?P<tsep>[ -])\d{2,8}(?:(?P=tsep)\d{2,4}){0,3}))"
            r"(?![\w:-]|[.,]\d)"
        ),
        _phone,
    ),
)

# Where any built-in rule could match: one of their literals, or a digit (cards and phone
# numbers without a "+"). A text without any of these is left as it is.
_TRIGGER = re.compile(
    "|".join(
        [re.escape(hint) for rule in _BUILTIN_RULES for hint in rule.hints]
        + [r"\d" for rule in _BUILTIN_RULES if not rule.hints][:1]
    )
)

# A "key": value pair in JSON text that does not parse (a tool call cut off mid-stream);
# the value may be an unterminated string.
_JSON_PAIR = re.compile(
    r'"(?P<key>[^"\\]{1,64})"\s*:\s*(?P<value>"(?:[^"\\]|\\.)*"?|[^\s,}\]]+)', re.DOTALL
)
_JSON_START = re.compile(r"\s*[\[{]")
_NON_ALNUM = re.compile(r"[^a-z0-9]")


def cut_marker(count: int) -> str:
    return f"\n[… {count:,} characters cut …]\n"


def _precut(text: str, keep: int) -> tuple[int, int] | None:
    """Where to cut a huge text before redacting it: after `keep` characters and `keep` before
    its end, at line breaks (no built-in rule spans lines); None when that saves nothing."""
    if len(text) <= 2 * keep:
        return None
    head_end = text.find("\n", keep)
    tail_start = text.rfind("\n", 0, len(text) - keep)
    if head_end < 0 or tail_start < 0 or tail_start <= head_end:
        return None
    return head_end, tail_start


def cut_middle(head: str, tail: str, limit: int, original: int) -> tuple[str, list[int] | None]:
    """`head`'s start and `tail`'s end within `limit` characters, a marker between them.

    Returns the text and the marker's [start, end]; a limit too small for a marker keeps the
    head only, as earlier versions did.
    """
    marker = cut_marker(original)
    room = limit - len(marker)
    if room < 2 * len(marker):
        return (head + tail)[:limit], None
    head_keep = _at_line_end(head, room // 2)
    tail_keep = _at_line_start(tail, room - len(head_keep))
    marker = cut_marker(max(original - len(head_keep) - len(tail_keep), 0))
    text = head_keep + marker + tail_keep
    return text[:limit], [len(head_keep), len(head_keep) + len(marker)]


def _at_line_end(text: str, size: int) -> str:
    """The first `size` characters, ending at a line break when one is near the end."""
    piece = text[:size]
    newline = piece.rfind("\n", max(0, size - 200))
    return piece[: newline + 1] if newline > 0 else piece


def _at_line_start(text: str, size: int) -> str:
    """The last `size` characters, starting after a line break when one is near the start."""
    piece = text[-size:] if size > 0 else ""
    newline = piece.find("\n", 0, 200)
    return piece[newline + 1 :] if 0 <= newline < len(piece) - 1 else piece


@lru_cache(maxsize=4096)
def normalize_key(key: str) -> str:
    """`X-Api-Key`, `api-key`, `apiKey` and `API_KEY` all become `apikey`."""
    lowered = key.lower()
    if lowered.startswith(("x-", "x_")):
        lowered = lowered[2:]
    return _NON_ALNUM.sub("", lowered)


class Redactor:
    """Redacts texts, JSON texts, items and steps with rules compiled once from settings."""

    def __init__(self, settings: RedactionSettings) -> None:
        self.enabled = settings.enabled
        self.max_text_chars = settings.max_text_chars
        # Configured patterns run first: they are the operator's more specific knowledge.
        custom = tuple(
            TextRule(p.name, re.compile(p.regex), self._custom_replacement(p.name))
            for p in settings.patterns
        )
        self.rules: tuple[TextRule, ...] = custom + _BUILTIN_RULES
        self._custom = custom
        self._json_keys: dict[str, str] = {}
        for name in settings.json_keys:
            self._json_keys.setdefault(normalize_key(name), name)

    @staticmethod
    def _custom_replacement(kind: str) -> Callable[[re.Match[str]], str]:
        text = marker(kind)
        # A pattern that can match the empty string must not sprinkle markers everywhere.
        return lambda match: text if match.group() else ""

    # Texts and JSON

    def redact_text(self, text: str) -> str:
        """One pass over a text that holds nothing to redact (most texts): the built-in
        rules run only where one of their triggers occurs."""
        if not self.enabled:
            return text
        for rule in self._custom:
            text = rule.apply(text)
        if _TRIGGER.search(text) is None:
            return text
        for rule in _BUILTIN_RULES:
            text = rule.apply(text)
        return text

    def redact_json_text(self, text: str) -> str:
        """Redact JSON by key and every string value in it; text rules if it does not parse."""
        if not self.enabled:
            return text
        if _JSON_START.match(text):
            try:
                redacted = self.redact_value(jsoncodec.loads(text))
                return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
            except (ValueError, RecursionError):
                pass  # not JSON, or nested too deeply to walk: redacted as text
            text = _JSON_PAIR.sub(self._pair, text)
        return self.redact_text(text)

    def _pair(self, match: re.Match[str]) -> str:
        name = self._json_keys.get(normalize_key(match.group("key")))
        if name is None or match.group("value") == "null":
            return match.group()
        start = match.start("value") - match.start()
        return match.group()[:start] + json.dumps(marker(name))

    def redact_value(self, value: Any) -> Any:
        """Redact a parsed JSON value: values under secret keys, then all strings and keys."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {self.redact_text(k): self._entry(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_value(v) for v in value]
        return value

    def _entry(self, key: str, value: Any) -> Any:
        name = self._json_keys.get(normalize_key(key))
        # A null hides nothing and still tells the reader the field was sent empty.
        if name is not None and value is not None:
            return marker(name)
        return self.redact_value(value)

    def _strings(self, value: Any) -> Any:
        """Run text rules over every string inside a small JSON object (item attrs)."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {k: self._strings(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._strings(v) for v in value]
        return value

    # Truncation

    def _bounded(self, text: str, as_json: bool) -> tuple[str, int | None, list[int] | None]:
        """Redact, then keep head and tail within max_text_chars around a marker.

        Returns the text, its original length when it was cut, and where the marker sits.
        Tails matter: errors and stack traces come last in a tool's output.
        """
        limit = self.max_text_chars
        redact = self.redact_json_text if as_json else self.redact_text
        ends = None if as_json else _precut(text, limit * _PRECUT_FACTOR)
        if ends is not None:
            head, tail = redact(text[: ends[0]]), redact(text[ends[1] :])
            if len(head) + len(tail) > limit:
                kept, span = cut_middle(head, tail, limit, len(text))
                return kept, len(text), span
            # Redaction shrank the pre-cut parts below the limit: the rest is needed after all.
        redacted = redact(text)
        if len(redacted) <= limit:
            return redacted, None, None
        half = len(redacted) // 2
        kept, span = cut_middle(redacted[:half], redacted[half:], limit, len(text))
        return kept, len(text), span

    # Items and steps

    def redact_item(self, item: Item) -> Item:
        attrs = self._strings(item.attrs) if self.enabled else dict(item.attrs)
        # Ids and tool names are the client's or the provider's strings, stored like text.
        changes: dict[str, Any] = {
            "attrs": attrs,
            "call_id": self._optional(item.call_id),
            "tool_name": self._optional(item.tool_name),
        }
        if item.text is not None:
            as_json = item.kind is ItemKind.TOOL_RESULT
            changes["text"], length, span = self._bounded(item.text, as_json)
            if length is not None:
                attrs.update(text_length=length, truncated=True)
            if span is not None:
                attrs["text_cut"] = span
        if item.arguments is not None:
            # A custom tool's free-form input is text even when it looks like JSON: kept as sent.
            as_json = not item.attrs.get("free_form")
            changes["arguments"], length, span = self._bounded(item.arguments, as_json=as_json)
            if length is not None:
                attrs.update(arguments_length=length, truncated=True)
            if span is not None:
                attrs["arguments_cut"] = span
        return item.with_changes(**changes)

    def _optional(self, text: str | None) -> str | None:
        return None if text is None else self.redact_text(text)

    def redact_violations(self, violations: Iterable[Violation]) -> list[Violation]:
        return [
            replace(v, detail=self.redact_text(v.detail), call_id=self._optional(v.call_id))
            for v in violations
        ]

    def _error(self, error: dict[str, Any]) -> dict[str, Any]:
        return dict(self.redact_value(error)) if self.enabled else error

    def redact_items(self, items: Iterable[Item]) -> list[Item]:
        return [self.redact_item(item) for item in items]

    def redact_step(self, step: StepRecord) -> StepRecord:
        """A redacted copy of the step; the original is left as the hot path built it."""
        return replace(
            step,
            path=self.redact_text(step.path),
            model=self._optional(step.model),
            raw_stop_reason=self._optional(step.raw_stop_reason),
            provider_request_id=self._optional(step.provider_request_id),
            response_id=self._optional(step.response_id),
            input_items=self.redact_items(step.input_items),
            output_items=self.redact_items(step.output_items),
            error=step.error if step.error is None else self._error(step.error),
            violations=self.redact_violations(step.violations),
            session_id=self._optional(step.session_id),
            declared_tools=None if step.declared_tools is None else self._json(step.declared_tools),
            params=None if step.params is None else self._json(step.params),
        )

    def _json(self, value: Any) -> Any:
        """Tools and parameters: values under secret keys, then every string and key."""
        return self.redact_value(value) if self.enabled else value

    def redact_refusal(self, refusal: RefusalRecord) -> RefusalRecord:
        return replace(
            refusal,
            violations=self.redact_violations(refusal.violations),
            items=self.redact_items(refusal.items),
            session_id=self._optional(refusal.session_id),
        )


def _summary_dropped(item: Item) -> Item:
    if item.kind is not ItemKind.REASONING or item.text is None:
        return item
    return item.with_changes(text=None, attrs={**item.attrs, "summary_dropped": True})


def without_reasoning_summaries(step: StepRecord) -> StepRecord:
    """The step with no reasoning summary text (`store_reasoning_summary` off)."""
    return replace(
        step,
        input_items=[_summary_dropped(item) for item in step.input_items],
        output_items=[_summary_dropped(item) for item in step.output_items],
    )
