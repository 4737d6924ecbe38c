"""A step's tool calls against the tools its request declared: names never declared, and
arguments that parse but break the declared JSON Schema. Sans-IO; each distinct schema is
compiled once (`checks.schemas`), in a bounded cache, and a broken or oversized one is
skipped, never raised; the verdict on arguments already judged against a schema is kept.

What the request declared reaches this module as `DeclaredTools`, name → JSON Schema of the
parameters, filled by each protocol adapter. None as a schema: the tool takes input the
provider defines, or input that is not JSON; its arguments are not validated.
- chat: `tools[].function` (`name` → `parameters`; none given → None), legacy
  `functions[]` likewise, `custom` tools → None.
- responses: `function` tools (`name` → `parameters`), `custom` tools and the built-in
  client tools `local_shell`, `shell`, `apply_patch` (→ None) of top-level `tools`, of
  `additional_tools` and `tool_search_output` input items, and inside namespaces as
  `namespace.name` (see `protocols.openai_responses_tools`). A request that uses a stored
  `prompt`, or continues a response without declaring tools, passes None for the whole
  declaration: its tools are unknown and names are not judged.
- messages: `tools[]` with `input_schema`; Anthropic-defined tools (`bash_*`,
  `text_editor_*`, `computer_*`, `memory_*`) → None.
A call whose input is free-form text (attrs "free_form") is never judged against a schema.
A request that declares no tools passes `{}`: any tool call it gets back is undeclared.
Provider-hosted tools (Responses `web_search`, `file_search`, `code_interpreter`, `mcp`, ...;
Anthropic server tools) run at the provider and come back as their own item types, never
as `tool_call` items, so they are neither declared here nor judged.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

from jsonschema.exceptions import ValidationError, relevance

from gateway import jsoncodec
from gateway.checks.output import call_label
from gateway.checks.schemas import Compiled, Unusable, compile_schema, cut, schema_key
from gateway.items import Item, ItemKind, Violation, ViolationKind, provider_run, provider_tool

log = logging.getLogger(__name__)

DeclaredTools = Mapping[str, Mapping[str, Any] | bool | None]

CACHE_SIZE = 256  # distinct schemas kept compiled
VERDICTS = 4096  # (schema, arguments) pairs whose verdict is kept
MAX_REMEMBERED_ARGUMENT_CHARS = 4096  # longer arguments are judged each time, not kept
MAX_ARGUMENT_CHARS = 256 * 1024  # larger arguments are not checked against their schema
SHOWN_ERRORS = 3  # schema errors named in one violation's detail
SCANNED_ERRORS = 50  # errors read from the validator, most relevant shown first
SHOWN_NAMES = 10  # declared names listed in an undeclared_tool detail
_UNSEEN = object()

_Compiled = Compiled | Unusable


class ToolChecker:
    """Judges tool calls; holds the compiled schemas and the verdicts on arguments already
    seen (agents repeat calls; a retried request repeats all of them), so one serves the
    whole app.

    Thread-safe: the caches are guarded, validators are read-only once built.
    """

    def __init__(self, *, cache_size: int = CACHE_SIZE, verdicts: int = VERDICTS) -> None:
        self._cache: OrderedDict[bytes, _Compiled] = OrderedDict()
        self._size = cache_size
        self._verdicts: OrderedDict[tuple[bytes, str], str | None] = OrderedDict()
        self._verdicts_size = verdicts
        self._lock = threading.Lock()

    def check(
        self, declared: DeclaredTools | None, calls: Iterable[Item], *, truncated: bool = False
    ) -> list[Violation]:
        """Violations of the tool calls among `calls` (other kinds are ignored).

        `declared` None means the request's tools are not known: names are not judged.
        `truncated` (the step stopped on `length`): the first choice's arguments are cut
        and already reported as `truncated_tool_call`, so they are not validated.
        """
        violations: list[Violation] = []
        for call in calls:
            if call.kind is not ItemKind.TOOL_CALL or not call.tool_name:
                continue
            if provider_run(call) or provider_tool(call):
                continue  # a tool the provider defines is declared by its type, not by schema
            if declared is not None and call.tool_name not in declared:
                violations.append(undeclared(call, declared))
                continue
            if declared is None or call.attrs.get("incomplete") or call.attrs.get("free_form"):
                continue
            if truncated and not call.attrs.get("choice"):
                continue
            schema = declared[call.tool_name]
            problem = self.arguments_error(schema, call.arguments)
            if problem is not None:
                detail = f"The arguments of tool call {call_label(call)} {problem}."
                violations.append(
                    Violation(ViolationKind.INVALID_TOOL_ARGUMENTS, detail, call_id=call.call_id)
                )
        return violations

    def arguments_error(
        self, schema: Mapping[str, Any] | bool | None, arguments: str | None
    ) -> str | None:
        """How `arguments` break `schema`, or None (also when either cannot be judged:
        arguments that do not parse are output_checks' to report)."""
        if schema is None:
            return None
        key = schema_key(schema)
        if key is None:  # too large or too deep to check
            return None
        text = arguments or ""
        if len(text) > MAX_REMEMBERED_ARGUMENT_CHARS:
            return self._judged(schema, key, arguments)
        with self._lock:
            verdict = self._verdicts.get((key, text), _UNSEEN)
            if verdict is not _UNSEEN:
                self._verdicts.move_to_end((key, text))
                return verdict  # type: ignore[return-value]
        verdict = self._judged(schema, key, arguments)
        with self._lock:
            self._verdicts[(key, text)] = verdict
            if len(self._verdicts) > self._verdicts_size:
                self._verdicts.popitem(last=False)
        return verdict

    def _judged(
        self, schema: Mapping[str, Any] | bool, key: bytes, arguments: str | None
    ) -> str | None:
        instance = _parsed(arguments)
        if instance is None:
            return None
        validator = self._compiled(schema, key)
        if isinstance(validator, Unusable) or validator.is_valid_fast(instance):
            return None
        try:
            errors = sorted(
                islice(validator.full.iter_errors(instance), SCANNED_ERRORS),
                key=relevance,
                reverse=True,
            )
        except Exception as exc:  # RecursionError, unresolvable $ref, a validator's own bug
            self._spoil(key, f"validation failed: {exc!r}")
            return None
        if not errors:
            return None
        shown = "; ".join(describe(error) for error in errors[:SHOWN_ERRORS])
        more = len(errors) - SHOWN_ERRORS
        suffix = f" (and {more}{'+' if len(errors) == SCANNED_ERRORS else ''} more)"
        return f"do not match its declared schema: {shown}{suffix if more > 0 else ''}"

    def compiled(self, schema: Mapping[str, Any] | bool) -> _Compiled:
        """The schema's validators, compiled on first sight; a broken schema is logged once
        (again only if it left the cache and came back)."""
        key = schema_key(schema)
        if key is None:
            return Unusable("too large or too deeply nested to check")
        return self._compiled(schema, key)

    def _compiled(self, schema: Mapping[str, Any] | bool, key: bytes) -> _Compiled:
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        built = compile_schema(schema)
        if isinstance(built, Unusable):
            log.warning("a declared tool schema is not checked: %s", built.reason)
        with self._lock:
            self._cache[key] = built
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return built

    def _spoil(self, key: bytes, reason: str) -> None:
        with self._lock:
            if isinstance(self._cache.get(key), Unusable):
                return
            self._cache[key] = Unusable(reason)
            # Verdicts reached with this schema before it failed stay: they were judged.
        log.warning("a declared tool schema is not checked: %s", reason)


def _parsed(arguments: str | None) -> Any:
    """The arguments as a JSON object, or None when they cannot (or should not) be judged."""
    if arguments is None or not arguments.strip():
        return {}  # what providers send for a call without parameters
    if len(arguments) > MAX_ARGUMENT_CHARS:
        return None
    try:
        value = jsoncodec.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def describe(error: ValidationError) -> str:
    """`$.path: 'rule' — message`, e.g. "$.location: 'required' — 'unit' is a required
    property"."""
    rule = error.validator if isinstance(error.validator, str) else "false"  # `false` schema
    return f"{error.json_path}: {rule!r} — {cut(error.message)}"


def undeclared(call: Item, declared: DeclaredTools) -> Violation:
    if declared:
        names = sorted(declared)
        listed = ", ".join(repr(name) for name in names[:SHOWN_NAMES])
        extra = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
        known = f"it declared {listed}{extra}"
    else:
        known = "it declared no tools"
    detail = (
        f"The model called tool {call_label(call)}, which the request did not declare "
        f"({known}); an agent cannot run it."
    )
    return Violation(ViolationKind.UNDECLARED_TOOL, detail, call_id=call.call_id)
