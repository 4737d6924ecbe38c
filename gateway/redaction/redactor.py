"""Redaction of everything the gateway stores: secrets and personal data become markers.

Rules are compiled once per Redactor; what is forwarded to the client is never touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, TypeVar

import orjson

from gateway import jsoncodec
from gateway.config import RedactionSettings
from gateway.items import Item, ItemKind, Violation
from gateway.protocols.wire_shapes.keys import OPAQUE
from gateway.redaction.credentials import ParamsRedactor, credential_kind
from gateway.redaction.memo import Memo
from gateway.redaction.rules import BUILTIN_RULES, TRIGGER, TextRule, marker
from gateway.redaction.truncate import cut_middle, precut
from gateway.step import REFUSAL_FIELDS, STEP_FIELDS, Persisted, RefusalRecord, StepRecord

# Pre-cutting a huge text before redaction keeps a 1 MB tool result from holding the GIL
# for long; cutting at a line break is safe because no built-in rule spans lines.
_PRECUT_FACTOR = 4

_R = TypeVar("_R", StepRecord, RefusalRecord)
_VALUES_BUDGET_BYTES = 4 * 1024 * 1024  # remembered JSON values, by their JSON's size

# A record's JSON objects and arrays come parsed (dict, list) or read-only (a mapping proxy,
# a tuple); a redacted copy is plain JSON either way.
_OBJECTS = (dict, MappingProxyType)
_ARRAYS = (list, tuple)


# A "key": value pair in JSON text that does not parse (a tool call cut off mid-stream);
# the value may be an unterminated string.
_JSON_PAIR = re.compile(
    # A bare value (a number, a word) stops before an object or array: the pairs inside
    # are matched one by one.
    r'"(?P<key>[^"\\]{1,64})"\s*:\s*(?P<value>"(?:[^"\\]|\\.)*"?|[^\s,}\]{\[][^\s,}\]]*)',
    re.DOTALL,
)
_JSON_START = re.compile(r"\s*[\[{]")
_NON_ALNUM = re.compile(r"[^a-z0-9]")


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
        # The markers rules write: a configured pattern leaves them whole.
        kinds = sorted({rule.kind for rule in BUILTIN_RULES} | {p.name for p in settings.patterns})
        self._markers = re.compile("|".join(re.escape(marker(kind)) for kind in kinds))
        self._marker_chars = max(len(marker(kind)) for kind in kinds)
        # Configured patterns run first: they are the operator's more specific knowledge.
        custom = tuple(
            TextRule(p.name, re.compile(p.regex), self._custom_replacement(p.name))
            for p in settings.patterns
        )
        self.rules: tuple[TextRule, ...] = custom + BUILTIN_RULES
        self._custom = custom
        self._json_keys: dict[str, str] = {}
        for name in settings.json_keys:
            self._json_keys.setdefault(normalize_key(name), name)
        # Histories repeat: each text and JSON text is scanned once while remembered.
        self._texts = Memo(self._scan_text)
        self._json_texts = Memo(self._scan_json_text)
        self._params = ParamsRedactor(self.redact_text, self._configured_key)
        # A run declares the same tools every step: their redacted copy, by their JSON.
        self._values: dict[bytes, Any] = {}
        self._values_held = 0

    def _custom_replacement(self, kind: str) -> Callable[[re.Match[str]], str]:
        text = marker(kind)

        def replacement(match: re.Match[str]) -> str:
            # A pattern that can match the empty string must not sprinkle markers everywhere.
            if not match.group():
                return ""
            # Nor rewrite a marker (say a pattern matching its own name): redacting a redacted
            # text again changes nothing, as a background step's row, redacted before its
            # record is, needs.
            return match.group() if self._in_marker(match) else text

        return replacement

    def _in_marker(self, match: re.Match[str]) -> bool:
        """Whether the match lies within one marker: it touches a rule's name, nothing more."""
        start, end = match.span()
        if "[REDACTED:" not in match.string:
            return False
        for found in self._markers.finditer(match.string, max(0, end - self._marker_chars)):
            if found.start() > start:
                return False
            if end <= found.end():
                return True
        return False

    # Texts and JSON

    def redact_text(self, text: str) -> str:
        return self._texts(text) if self.enabled else text

    def _scan_text(self, text: str) -> str:
        """One pass over a text that holds nothing to redact (most texts): the built-in
        rules run only where one of their triggers occurs."""
        for rule in self._custom:
            text = rule.apply(text)
        if TRIGGER.search(text) is None:
            return text
        for rule in BUILTIN_RULES:
            text = rule.apply(text)
        return text

    def redact_json_text(self, text: str) -> str:
        """Redact JSON by key and every string value in it; text rules if it does not parse."""
        return self._json_texts(text) if self.enabled else text

    def _scan_json_text(self, text: str) -> str:
        if _JSON_START.match(text):
            try:
                redacted = self.redact_value(jsoncodec.loads(text))
                return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
            except (ValueError, RecursionError):
                pass  # not JSON, or nested too deeply to walk: redacted as text
            text = _JSON_PAIR.sub(self._pair, text)
        return self.redact_text(text)

    def _configured_key(self, key: str) -> str | None:
        return self._json_keys.get(normalize_key(key))

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
        if isinstance(value, _OBJECTS):
            return {self.redact_text(k): self._entry(k, v) for k, v in value.items()}
        if isinstance(value, _ARRAYS):
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
        if isinstance(value, _OBJECTS):
            return {k: self._strings(v) for k, v in value.items()}
        if isinstance(value, _ARRAYS):
            return [self._strings(v) for v in value]
        return value

    def _attrs(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """An item's attrs redacted; opaque payloads (ciphertext a provider checks) kept
        byte for byte: a rule must not rewrite base64 it happens to match."""
        redacted = {k: self._strings(v) for k, v in attrs.items() if k != OPAQUE}
        if OPAQUE in attrs:
            redacted[OPAQUE] = attrs[OPAQUE]
        return redacted

    # Truncation

    def _bounded(self, text: str, as_json: bool) -> tuple[str, int | None, list[int] | None]:
        """Redact, then keep head and tail within max_text_chars around a marker.

        Returns the text, its original length when it was cut, and where the marker sits.
        Tails matter: errors and stack traces come last in a tool's output.
        """
        limit = self.max_text_chars
        redact = self.redact_json_text if as_json else self.redact_text
        ends = None if as_json else precut(text, limit * _PRECUT_FACTOR)
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
        attrs = self._attrs(item.attrs) if self.enabled else dict(item.attrs)
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
        # Built directly: `dataclasses.replace` costs several times more, item by item.
        return Item(
            item.kind,
            item.role,
            changes.get("text", item.text),
            changes["call_id"],
            changes["tool_name"],
            changes.get("arguments", item.arguments),
            item.is_error,
            attrs,
        )

    def _optional(self, text: str | None) -> str | None:
        return None if text is None else self.redact_text(text)

    def redact_violations(self, violations: Iterable[Violation]) -> tuple[Violation, ...]:
        return tuple(
            Violation(v.kind, self.redact_text(v.detail), self._optional(v.call_id), v.enforced)
            for v in violations
        )

    def redact_items(self, items: Iterable[Item]) -> tuple[Item, ...]:
        return tuple(self.redact_item(item) for item in items)

    def redact_json(self, value: Any) -> Any:
        """Errors, tools and parameters: values under keys named like credentials and in
        headers objects (redaction.credentials), then every string and key. A value met
        before (a run's tools, its parameters) gives the copy made then: nothing changes a
        record's JSON, so records may share it."""
        if not self.enabled:
            return value
        try:
            key = orjson.dumps(value, default=jsoncodec.plain)
        except TypeError:  # what orjson refuses (a huge integer, a lone surrogate, depth)
            return self._walked(value)
        found = self._values.get(key)
        if found is None:
            found = self._walked(value)
            if isinstance(found, list):  # as a record keeps it: the same tuple each time
                found = tuple(found)
            self._values_held += len(key)
            if self._values_held > _VALUES_BUDGET_BYTES:  # forgotten at once, as Memo does
                self._values.clear()
                self._values_held = len(key)
            self._values[key] = found
        return found

    def _walked(self, value: Any) -> Any:
        try:
            return self._params(value)
        except RecursionError:  # nested past the walk (a client's): kept as redacted text
            text = _JSON_PAIR.sub(self._credential_pair, jsoncodec.dumps_text(value))
            return self.redact_text(text)

    def _credential_pair(self, match: re.Match[str]) -> str:
        """A credential's string value in JSON text too deep to walk, by the same rule."""
        key = match.group("key")
        name = self._configured_key(key) or credential_kind(key)
        if name is None or not match.group("value").startswith('"'):
            return match.group()
        start = match.start("value") - match.start()
        return match.group()[:start] + json.dumps(marker(name))

    def redact_step(self, step: StepRecord) -> StepRecord:
        """A redacted copy of the step; the original is left as the hot path built it."""
        return self._redacted(step, STEP_FIELDS)

    def redact_refusal(self, refusal: RefusalRecord) -> RefusalRecord:
        return self._redacted(refusal, REFUSAL_FIELDS)

    def _redacted(self, record: _R, table: tuple[Persisted, ...]) -> _R:
        """A copy of the record with each field redacted as its declaration says."""
        how: dict[str, Callable[[Any], Any]] = {
            "text": self.redact_text,
            "items": self.redact_items,
            "violations": self.redact_violations,
            "json": self.redact_json,
        }
        changes = {}
        for f in table:
            value = getattr(record, f.name)
            if f.redact is not None and value is not None:
                changes[f.name] = how[f.redact](value)
        return replace(record, **changes)


def without_opaque(step: StepRecord) -> StepRecord:
    """The step without the opaque payloads its items hold (`keep_opaque_reasoning`): they
    go back to providers in cassettes and forks, never to exporters."""
    if not any(OPAQUE in i.attrs for i in (*step.input_items, *step.output_items)):
        return step
    return replace(
        step,
        input_items=tuple(map(_opaque_dropped, step.input_items)),
        output_items=tuple(map(_opaque_dropped, step.output_items)),
    )


def _opaque_dropped(item: Item) -> Item:
    if OPAQUE not in item.attrs:
        return item
    return item.with_changes(attrs={k: v for k, v in item.attrs.items() if k != OPAQUE})


def _summary_dropped(item: Item) -> Item:
    if item.kind is not ItemKind.REASONING or item.text is None:
        return item
    return item.with_changes(text=None, attrs={**item.attrs, "summary_dropped": True})


def without_reasoning_summaries(step: StepRecord) -> StepRecord:
    """The step with no reasoning summary text (`store_reasoning_summary` off)."""
    return replace(
        step,
        input_items=tuple(_summary_dropped(item) for item in step.input_items),
        output_items=tuple(_summary_dropped(item) for item in step.output_items),
    )
