"""Which session a trace belongs to: the `X-Loopwatch-Session-Id` header, else the
end-user or session fields of the request body. Pure; the id is returned raw (bounded),
to be redacted with everything else before storage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SESSION_HEADER = "X-Loopwatch-Session-Id"
MAX_SESSION_CHARS = 256

# Body fields per protocol, most specific first: a declared session beats an end-user id.
# (Wire names live here rather than in each adapter until adapters expose them.)
_OPENAI = (("metadata", "session_id"), ("safety_identifier",), ("user",))
BODY_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "chat": _OPENAI,
    "responses": _OPENAI,
    "messages": (("metadata", "user_id"),),
}


def session_id(headers: Mapping[str, str], body: Any, protocol: str) -> str | None:
    """The session id of a request, or None.

    Order: the header; then, for OpenAI Chat and Responses, `metadata.session_id`,
    `safety_identifier`, `user`; for Anthropic Messages, `metadata.user_id`. Only
    non-blank strings count; surrounding whitespace is dropped and the rest cut at
    `MAX_SESSION_CHARS` characters. Passthrough requests use the header alone.
    """
    found = _usable(headers.get(SESSION_HEADER))
    if found is not None:
        return found
    for path in BODY_FIELDS.get(protocol, ()):
        found = _usable(_lookup(body, path))
        if found is not None:
            return found
    return None


def _lookup(body: Any, path: tuple[str, ...]) -> Any:
    value = body
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _usable(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value[:MAX_SESSION_CHARS] if value else None
