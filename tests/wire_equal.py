"""What a cassette's request body must equal: the body the provider received, with exactly
the allowances the contract makes and no other — texts as the default redactor changes them,
readable reasoning text replaced by the store's placeholder (the field stays), opaque
reasoning payloads left out (they are stored only when kept), inline media left out (only
its type is recorded)."""

from __future__ import annotations

from typing import Any

from gateway.config import RedactionSettings
from gateway.protocols.wire_shapes.keys import ECHO, REASONING_PLACEHOLDER, RESPELT, WIRE
from gateway.protocols.wire_shapes.record import is_media
from gateway.redaction.redactor import Redactor

_REDACTOR = Redactor(RedactionSettings())
_READABLE = frozenset({"thinking", "reasoning_content", "reasoning"})
_READABLE_PARTS = {
    "reasoning_text": "text",
    "summary_text": "text",
    "reasoning.text": "text",
    "reasoning.summary": "summary",
}
_OPAQUE = frozenset({"signature", "encrypted_content", "thought_signature"})
_OPAQUE_BLOCKS = {"redacted_thinking": "data", "reasoning.encrypted": "data"}


def as_recorded(sent: Any, history: str) -> Any:
    """`sent` as a cassette spells it back; only its `history` field and the instruction
    fields hold texts the allowances touch, the rest is compared redacted."""
    return {
        key: _allowed(value) if key in (history, "system") else _redacted(value)
        for key, value in sent.items()
    }


def _allowed(value: Any, as_json: bool = False) -> Any:
    if isinstance(value, list):
        return [_allowed(v, as_json) for v in value]
    if not isinstance(value, dict):
        return _redacted(value, as_json)
    kind = value.get("type")
    out: dict[str, Any] = {}
    for key, field in value.items():
        if (key in _OPAQUE or key == _OPAQUE_BLOCKS.get(kind)) and field is not None:
            continue
        if isinstance(field, str) and is_media(key, field, kind):
            continue  # inline images, audio and files: only their type is recorded
        if isinstance(field, str) and field and _readable(key, kind):
            out[key] = REASONING_PLACEHOLDER
        else:
            out[key] = _allowed(field, as_json or _json_text(value, key))
    return out


def _json_text(element: dict[str, Any], key: str) -> bool:
    """Tool results and call arguments: the redactor stores JSON in them compactly."""
    if key == "content" and (
        element.get("role") in _RESULT_ROLES or element.get("type") == "tool_result"
    ):
        return True
    if key == "output" and element.get("type") in _RESULT_TYPES:
        return True
    return key == "arguments" and element.get("type") != "custom_tool_call"


_RESULT_ROLES = frozenset({"tool", "function"})
_RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})


def _readable(key: str, kind: Any) -> bool:
    if kind in _READABLE_PARTS:
        return key == _READABLE_PARTS[kind]
    return key in _READABLE and kind != "redacted_thinking"


def _redacted(value: Any, as_json: bool = False) -> Any:
    if isinstance(value, str):
        return _REDACTOR.redact_json_text(value) if as_json else _REDACTOR.redact_text(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


def differences(rebuilt: Any, expected: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, a line each (empty: JSON-equal)."""
    if isinstance(rebuilt, dict) and isinstance(expected, dict):
        out: list[str] = []
        for key in sorted(set(rebuilt) | set(expected)):
            if key not in rebuilt:
                out.append(f"{path}.{key}: missing")
            elif key not in expected:
                out.append(f"{path}.{key}: extra")
            else:
                out += differences(rebuilt[key], expected[key], f"{path}.{key}")
        return out
    if isinstance(rebuilt, list) and isinstance(expected, list):
        if len(rebuilt) != len(expected):
            return [f"{path}: {len(rebuilt)} elements, sent {len(expected)}"]
        return [
            d
            for n, pair in enumerate(zip(rebuilt, expected, strict=True))
            for d in differences(*pair, f"{path}[{n}]")
        ]
    if rebuilt == expected and type(rebuilt) is type(expected):
        return []
    return [f"{path}: {str(rebuilt)[:80]!r} != {str(expected)[:80]!r}"]


def unshaped(attrs: dict[str, Any]) -> dict[str, Any]:
    """An item's attrs without the wire shapes a cassette spells its request back from."""
    return {key: value for key, value in attrs.items() if key not in (WIRE, ECHO, RESPELT)}
