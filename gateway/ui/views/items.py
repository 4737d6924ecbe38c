"""Typed items as the page shows them, and a step's new items folded into one line."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gateway.items import EXECUTED_BY, PROVIDER
from gateway.ui.views.fmt import one_line
from gateway.ui.views.text import TextView, pretty_json, text_view

KIND_LABELS = {
    "instruction": "instruction",
    "user": "user",
    "assistant_text": "assistant",
    "tool_call": "tool call",
    "tool_result": "tool result",
    "reasoning": "reasoning",
    "refusal": "refusal",
    "other": "other",
}
TIMES = "\N{MULTIPLICATION SIGN}"
PLURALS = {"tool call": "tool calls", "tool result": "tool results", "other": "others"}


@dataclass
class ItemView:
    anchor: str
    kind: str
    label: str
    step_id: str | None = None
    role: str | None = None
    tool_name: str | None = None
    call_id: str | None = None
    text: str | None = None
    arguments: str | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    incomplete: bool = False
    tokens: int | None = None  # a reasoning item's token count
    truncated_from: int | None = None  # the original length of a text the store cut
    head_only: bool = False  # cut by an older store, which kept only the head
    link: str | None = None  # the partner call or result: an in-page or step-page URL
    link_label: str | None = None
    link_step: str | None = None  # the partner's step id, for the script to load it
    retry_note: str | None = None
    wait_ms: float | None = None  # a call's tool time: its step's end to its answer
    executions: list[dict[str, Any]] = field(default_factory=list)  # MCP runs of a call
    child: dict[str, Any] | None = None  # the sub-agent run a call started (read API child)
    # A tool the provider ran inside its answer (web search, code execution, its MCP
    # connector): call and result both; the client owes nothing for it.
    provider: bool = False
    tool_type: str | None = None  # what the provider's tool does: web_search, mcp, ...
    server: str | None = None  # the MCP server of the provider's connector
    # A client call made by code the provider ran: that code's call id, and a link to it.
    caller: str | None = None
    caller_link: str | None = None
    caller_tool: str | None = None

    # Built when a page shows the item: a long trace's page shows none of them.
    @cached_property
    def body(self) -> TextView | None:
        if self.text is None:
            return None
        as_json = self.kind == "tool_result"
        return text_view(self.text, cut=self.attrs.get("text_cut"), as_json=as_json)

    @cached_property
    def args(self) -> TextView | None:
        if self.arguments is None:
            return None
        return text_view(self.arguments, cut=self.attrs.get("arguments_cut"), as_json=True)

    @property
    def arguments_valid(self) -> bool:
        args = self.args
        return args is None or args.pretty or self.attrs.get("arguments_cut") is not None


def item_view(
    item: dict[str, Any], anchor: str, step_id: str | None, usage: dict[str, Any]
) -> ItemView:
    kind = item.get("kind") or "other"
    attrs = item.get("attrs") or {}
    view = ItemView(anchor, kind, KIND_LABELS.get(kind, kind), step_id)
    view.role, view.call_id = item.get("role"), item.get("call_id")
    view.tool_name = item.get("tool_name")
    if _provider_run(item):
        view.provider, view.tool_type = True, _text_or_none(attrs.get("tool_type"))
        view.server = _text_or_none(attrs.get("server"))
    elif kind == "tool_call":
        view.caller = _text_or_none(attrs.get("caller"))
    view.executions = list(item.get("executions") or [])
    view.is_error = bool(item.get("is_error"))
    view.incomplete = bool(attrs.get("incomplete"))
    text, arguments = item.get("text"), item.get("arguments")
    view.text, view.attrs = text, attrs
    if text is not None:
        view.truncated_from = _cut_from(attrs.get("text_length"), text)
    if kind == "tool_call" and arguments:
        view.arguments = arguments
        cut = attrs.get("arguments_cut")
        length = _cut_from(attrs.get("arguments_length"), arguments)
        view.truncated_from = view.truncated_from or length
        if length is not None and cut is None:
            view.head_only = True
    if view.truncated_from and text is not None and attrs.get("text_cut") is None:
        view.head_only = True
    if kind == "reasoning":
        tokens = attrs.get("tokens")
        if not isinstance(tokens, int):
            tokens = usage.get("reasoning_tokens")
        view.tokens = tokens if isinstance(tokens, int) else None
    return view


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _cut_from(length: object, text: str) -> int | None:
    return length if isinstance(length, int) and length > len(text) else None


def digest(items: list[dict[str, Any]]) -> str:
    """'2 tool results', 'tool call get_weather x2' (with a times sign), or a line of the
    text: what is new. A tool the provider ran is named apart, its result with it."""
    if not items:
        return ""
    texts = [item for item in items if item["kind"] in ("assistant_text", "user", "refusal")]
    if len(items) == 1 and texts:
        line = one_line(texts[0].get("text"), 70) or ""
        return f"{KIND_LABELS[texts[0]['kind']]}: {line}" if line else KIND_LABELS[texts[0]["kind"]]
    names: dict[str, Counter[str]] = {CLIENT_CALLS: Counter(), PROVIDER_CALLS: Counter()}
    counts: Counter[str] = Counter()
    for item in items:
        label = _digest_label(item)
        if label is None:
            continue
        counts[label] += 1
        if label in names:
            names[label][item.get("tool_name") or "?"] += 1
    parts: list[str] = []
    for label, count in counts.items():
        if label in names:
            called = names[label]
            listed = [times(name, n) for name, n in called.most_common(3)]
            more = f" +{len(called) - 3}" if len(called) > 3 else ""
            said = label if label == PROVIDER_CALLS else _count(label, count)
            parts.append(f"{said} {', '.join(listed)}{more}")
        elif label != "reasoning":
            parts.append(_count(label, count))
    return " · ".join(parts)


CLIENT_CALLS = KIND_LABELS["tool_call"]
PROVIDER_CALLS = "provider ran"


def _digest_label(item: dict[str, Any]) -> str | None:
    """Its kind's label; None for a provider-run result, told by its call."""
    kind = item["kind"]
    if _provider_run(item):
        return PROVIDER_CALLS if kind == "tool_call" else None
    return KIND_LABELS.get(kind, "other")


def _provider_run(item: dict[str, Any]) -> bool:
    """A tool call the provider ran, or its result (gateway.items.provider_run, on JSON)."""
    if item.get("kind") not in ("tool_call", "tool_result"):
        return False
    return (item.get("attrs") or {}).get(EXECUTED_BY) == PROVIDER


def times(name: str, count: int) -> str:
    return f"{name} {TIMES}{count}" if count > 1 else name


def _count(label: str, count: int) -> str:
    return label if count == 1 else f"{count} {PLURALS.get(label, label)}"


def error_text(error: Any) -> TextView | None:
    """A step's error object, indented."""
    if error is None:
        return None
    raw = error if isinstance(error, str) else json.dumps(error, ensure_ascii=False)
    shown = pretty_json(raw) or raw
    return text_view(shown)
