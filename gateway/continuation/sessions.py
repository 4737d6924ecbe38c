"""Which session a trace belongs to: the `X-Loopwatch-Session-Id` header, else the
end-user or session fields of the request body. Pure; the id is returned raw (bounded),
to be redacted with everything else before storage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SESSION_HEADER = "X-Loopwatch-Session-Id"
MAX_SESSION_CHARS = 256

Fields = tuple[tuple[str, ...], ...]


def session_id(headers: Mapping[str, str], body: Any, fields: Fields) -> str | None:
    """The session id of a request, or None.

    Order: the header; then the body `fields` the client's protocol names a session or an
    end user in (its adapter's `session_fields`, each a path of keys, most specific
    first). Only non-blank strings count; surrounding whitespace is dropped and the rest
    cut at `MAX_SESSION_CHARS` characters. Passthrough requests use the header alone.
    """
    found = _usable(headers.get(SESSION_HEADER))
    if found is not None:
        return found
    for path in fields:
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
