"""What a tool call says, as text: canonical arguments to match a model's call by content,
and a result's text to compare with what the model was given."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gateway import jsoncodec

# Separators a client puts between a server's name and a tool's (`fs__read`, `fs.read`).
NAME_SEPARATORS = ("__", "_", ".", "-", "/")


def result_text(result: Any) -> str:
    """The text blocks of a `tools/call` result joined by newlines; its `structuredContent`
    as JSON when it has no text."""
    if not isinstance(result, dict):
        return ""
    blocks = result.get("content")
    texts = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    if texts:
        return "\n".join(texts)
    structured = result.get("structuredContent")
    return "" if structured is None else jsoncodec.dumps_text(structured)


def canonical(arguments: Any) -> str:
    """Arguments as canonical JSON (sorted keys, compact); a model's arrive as text."""
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = jsoncodec.loads(text)
        except (ValueError, RecursionError):
            return text.strip()
    return canonical_value({} if arguments is None else arguments)


def args_key(arguments: Any) -> str:
    """A short hash of the canonical arguments: what a stored model call is found by."""
    return hashlib.sha256(canonical(arguments).encode()).hexdigest()[:32]


def canonical_value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def names_match(model_tool: str, mcp_tool: str) -> bool:
    """The model's tool name is the MCP tool's, or ends with it after a separator."""
    if model_tool == mcp_tool:
        return True
    return any(model_tool.endswith(sep + mcp_tool) for sep in NAME_SEPARATORS)


def mcp_names(model_tool: str) -> set[str]:
    """Every MCP tool name `names_match` pairs with this model tool name."""
    names = {model_tool}
    for sep in NAME_SEPARATORS:
        start = model_tool.find(sep)
        while start != -1:
            suffix = model_tool[start + len(sep) :]
            if suffix:
                names.add(suffix)
            start = model_tool.find(sep, start + 1)
    return names


def delivery(tool_result: str, mcp_text: str) -> str:
    """How the model got the result: `delivered` (all of the MCP text is in it),
    `truncated` (a shortened part of it) or `transformed`."""
    given, produced = tool_result.strip(), mcp_text.strip()
    if produced in given:
        return "delivered"
    if given and _shortened_part(given, produced):
        return "truncated"
    return "transformed"


def _shortened_part(given: str, produced: str) -> bool:
    """A prefix of the result (ignoring a cut marker a client appends) or its head and tail."""
    for cut in range(len(given), max(0, len(given) - 64), -1):
        head = given[:cut].rstrip(" .…\n[]")
        if len(head) >= 8 and produced.startswith(head) and len(head) < len(produced):
            return True
    half = len(given) // 3
    return half >= 8 and produced.startswith(given[:half]) and produced.endswith(given[-half:])
