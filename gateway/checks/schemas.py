"""Declared tool schemas, compiled once: the reference validator (`jsonschema`, whose errors
name the JSON path and the rule) and, where the schema uses only keywords both read alike, a
compiled one (`jsonschema-rs`) that answers "valid?" in a few microseconds. Sans-IO: neither
ever fetches a `$ref`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import jsonschema_rs
import orjson
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

MAX_SCHEMA_CHARS = 256 * 1024  # a larger schema is not checked
MESSAGE_CHARS = 200  # one error's message is cut there: enum lists and values can be long

# Keywords the two validators agree on. A schema with any other (`pattern`: the regular
# expression dialects differ; `multipleOf`: exact decimal against float arithmetic;
# `format`; vocabulary extensions) is judged by the reference validator alone, so a verdict
# never depends on which one ran. Without `$ref` the compiled one recurses no deeper than
# the schema, whatever the arguments' nesting.
AGREED_KEYWORDS = frozenset(
    {
        "$schema", "$id", "$defs", "definitions", "$comment", "title", "description",
        "default", "examples", "deprecated", "readOnly", "writeOnly", "type", "enum", "const",
        "properties", "required", "additionalProperties", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
        "maxContains", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "minProperties", "maxProperties", "anyOf", "oneOf",
        "allOf", "not", "if", "then", "else", "dependentRequired", "propertyNames",
    }
)  # fmt: skip
# Where the keywords hold subschemas: one, a list of them, or a map of names to them; every
# other keyword holds data (a type name, a bound, an enum) that is not walked.
_ONE_SCHEMA = frozenset(
    {"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
     "propertyNames", "items"}
)  # fmt: skip
_SCHEMA_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems", "items"})
_SCHEMA_MAP = frozenset({"properties", "$defs", "definitions"})


@dataclass(frozen=True, slots=True)
class Unusable:
    """A schema that cannot be used: why, said once when it was compiled."""

    reason: str


@dataclass(frozen=True, slots=True)
class Compiled:
    """A usable schema: `full` explains errors; `fast`, where present, tells valid ones."""

    full: Validator
    fast: Any = None  # a jsonschema_rs validator

    def is_valid_fast(self, instance: Any) -> bool:
        """True when the compiled validator accepts the instance (False: ask `full`)."""
        if self.fast is None:
            return False
        try:
            return bool(self.fast.is_valid(instance))
        except Exception:  # a value it cannot take (an integer past 64 bits ...)
            return False

    def is_valid(self, instance: Any) -> bool:
        return self.is_valid_fast(instance) or bool(self.full.is_valid(instance))


def schema_key(schema: Mapping[str, Any] | bool) -> bytes | None:
    """A digest of the schema's canonical JSON, or None when it is too big or too deep."""
    try:
        text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson refuses (an integer past 64 bits, a non-string key)
        try:
            text = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=repr).encode(
                "utf-8", "surrogatepass"
            )
        except (RecursionError, ValueError, TypeError):
            return None
    if len(text) > MAX_SCHEMA_CHARS:
        return None
    return blake2b(text, digest_size=16).digest()


def compile_schema(schema: Mapping[str, Any] | bool) -> Compiled | Unusable:
    if not isinstance(schema, Mapping | bool):
        return Unusable(f"a schema must be an object or a boolean, not {type(schema).__name__}")
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)  # type: ignore[arg-type]  # booleans are schemas too
        full = cls(schema)
    except Exception as exc:  # SchemaError, a non-string $schema, RecursionError ...
        message = getattr(exc, "message", None) or repr(exc)
        return Unusable(f"invalid schema: {cut(str(message))}")
    return Compiled(full, _fast(schema) if _agreed(schema) else None)


def _fast(schema: Mapping[str, Any] | bool) -> Any:
    try:
        document = schema if isinstance(schema, bool) else dict(schema)
        return jsonschema_rs.validator_for(document, validate_formats=False, offline=True)
    except Exception:  # it reads the schema differently: the reference validator alone
        return None


def _agreed(schema: Any, depth: int = 0) -> bool:
    """True when every keyword of the schema, at every depth, is one both validators read
    alike."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, Mapping) or depth > 32:
        return False
    for keyword, value in schema.items():
        if keyword not in AGREED_KEYWORDS:
            return False
        if keyword in _SCHEMA_MAP:
            subschemas = list(value.values()) if isinstance(value, Mapping) else [None]
        elif keyword in _SCHEMA_LIST and isinstance(value, list):
            subschemas = value
        elif keyword in _ONE_SCHEMA:
            subschemas = [value]
        else:
            continue
        if not all(_agreed(sub, depth + 1) for sub in subschemas):
            return False
    return True


def cut(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
