"""The one cursor codec of keyset pagination: a page's last sort values as an opaque,
URL-safe token (base64url of a JSON array, unpadded)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def encode(values: Sequence[Any]) -> str:
    raw = json.dumps(list(values)).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, read: Callable[[list[Any]], T]) -> T:
    """The cursor's values as `read` makes them; any fault is one ValueError("invalid
    cursor"), which the read API answers with a 400 naming the cursor."""
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(values, list):
            raise ValueError
        return read(values)
    except (binascii.Error, ValueError, TypeError):
        raise ValueError("invalid cursor") from None
