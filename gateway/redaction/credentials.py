"""Credentials in a request's parameters and tool declarations, found by a rule on key names.

A rule, not a list of known fields: a provider adds connectors, MCP servers and auth blocks
faster than any list follows, and a key named like a credential (`authorization_token`,
`x-api-key`, `clientSecret`) holds one whatever field it sits in. Values inside `headers`
objects are redacted whatever the header's name. Counts and limits (`max_tokens`,
`budget_tokens`) and cache keys are not credentials, nor is any number or boolean.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from gateway.redaction.rules import marker

_OBJECTS = (dict, MappingProxyType)
_ARRAYS = (list, tuple)

# A key's words, however it is spelt: snake, kebab, dotted, camelCase, UPPER.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# The last word of a credential's name. "tokens" is not one: `max_tokens`, `input_tokens`
# and `budget_tokens` count, they do not authorize.
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "apikey",
        "apikeys",
        "token",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "cookie",
        "cookies",
        "credential",
        "credentials",
    }
)
# "key" alone names anything (a metadata entry, a sort order); `api_key`, `private_key`,
# `x_api_key` name a secret. A cache key only groups requests for the provider's cache.
_KEY_WORDS = frozenset({"key", "keys"})
_NOT_SECRET_BEFORE_KEY = frozenset({"cache"})
# Objects whose keys name schemas, not values (JSON Schema in tool declarations): a tool
# taking an `api_key` argument declares `"api_key": {"type": "string"}`, no secret.
_SCHEMA_MAPS = frozenset({"properties", "patternproperties", "defs", "definitions"})

Redact = Callable[[str], str]
Configured = Callable[[str], str | None]


def words(key: str) -> tuple[str, ...]:
    return tuple(word.lower() for word in _WORDS.findall(key))


@lru_cache(maxsize=4096)
def credential_kind(key: str) -> str | None:
    """The marker's kind when `key` names a credential (its last word: a key's name may
    be anything, the marker repeats none of it), else None."""
    found = words(key)
    if not found:
        return None
    last = found[-1]
    if last in _SECRET_WORDS:
        return last
    if last in _KEY_WORDS and len(found) > 1 and found[-2] not in _NOT_SECRET_BEFORE_KEY:
        return "api_key" if found[-2] == "api" else last
    return None


@lru_cache(maxsize=4096)
def _is_headers(key: str) -> bool:
    """`headers`, `extra_headers`, `httpHeaders`: a map of header names to values."""
    found = words(key)
    return bool(found) and found[-1] == "headers"


@lru_cache(maxsize=4096)
def _is_schema_map(key: str) -> bool:
    return "".join(words(key)) in _SCHEMA_MAPS


def _hidden(value: Any, kind: str) -> Any:
    """Every string in `value` (a credential's value) becomes a marker; numbers, booleans
    and nulls say nothing secret and stay readable."""
    if isinstance(value, str):
        return marker(kind)
    if isinstance(value, _OBJECTS):
        return {k: _hidden(v, kind) for k, v in value.items()}
    if isinstance(value, _ARRAYS):
        return [_hidden(v, kind) for v in value]
    return value


class ParamsRedactor:
    """Walks parameters, tool declarations and error bodies: credentials by name (the
    configured `json_keys` first, then the rule), then text rules over every other string."""

    def __init__(self, redact_text: Redact, configured: Configured) -> None:
        self._text = redact_text
        self._configured = configured

    def __call__(self, value: Any) -> Any:
        return self._value(value, schemas=False)

    def _value(self, value: Any, schemas: bool) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, _OBJECTS):
            return {self._text(k): self._entry(k, v, schemas) for k, v in value.items()}
        if isinstance(value, _ARRAYS):
            return [self._value(v, False) for v in value]
        return value

    def _entry(self, key: str, value: Any, schemas: bool) -> Any:
        if value is None or isinstance(value, bool | int | float):
            return value
        if schemas and isinstance(value, _OBJECTS):
            return self._value(value, False)  # a schema named by its key, not a secret
        kind = self._configured(key) or credential_kind(key)
        if kind is not None:
            return _hidden(value, kind)
        if _is_headers(key):
            return _hidden(value, "header")
        return self._value(value, _is_schema_map(key))
