"""The outcome of a tool the OpenAI Responses provider ran, as a short account: what a search
looked for and found, logs and output, or the error; never image data or encrypted content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.protocols.json_values import as_dict, as_int, as_list, as_str


@dataclass(frozen=True, slots=True)
class Outcome:
    text: str | None
    failed: bool
    facts: dict[str, Any] = field(default_factory=dict)  # small counts and codes for attrs


def outcome_of(kind: str, item: dict[str, Any]) -> Outcome:
    """The outcome an item of `kind` holds; its status says when it holds none."""
    status = as_str(item.get("status"))
    lines, failed, facts = _READERS.get(kind, _nothing)(item)
    if status is not None and status != "completed":
        facts = {**facts, "status": status}
    text = "\n".join(line for line in lines if line) or status
    return Outcome(text, failed or status == "failed", facts)


Read = tuple[list[str], bool, dict[str, Any]]


def _nothing(item: dict[str, Any]) -> Read:
    return [], False, {}


def search_query(action: dict[str, Any]) -> dict[str, Any]:
    """What a web search action asked: the action without the sources it found."""
    return {key: value for key, value in action.items() if key != "sources"}


def _web_search(item: dict[str, Any]) -> Read:
    action = as_dict(item.get("action"))
    queries = [as_str(action.get("query")), *map(as_str, as_list(action.get("queries")))]
    sources = [as_str(as_dict(s).get("url")) for s in as_list(action.get("sources"))]
    found = [as_str(action.get("pattern")), as_str(action.get("url")), *sources]
    # `query` often repeats in `queries`: each line once.
    return list(dict.fromkeys(line for line in (*queries, *found) if line)), False, {}


def _file_search(item: dict[str, Any]) -> Read:
    results = item.get("results")  # present only when the request asked to include them
    found = [as_dict(r) for r in as_list(results)]
    lines = [as_str(r.get("filename")) or as_str(r.get("file_id")) or "" for r in found]
    return lines, False, {"results": len(found)} if isinstance(results, list) else {}


def _code_interpreter(item: dict[str, Any]) -> Read:
    lines = []
    for output in map(as_dict, as_list(item.get("outputs"))):
        # Logs as text; an image by its URL, never its data.
        lines.append(as_str(output.get("logs")) or as_str(output.get("url")) or "")
    return lines, False, {}


def _image_generation(item: dict[str, Any]) -> Read:
    error = as_dict(item.get("error"))
    if error:
        return [as_str(error.get("message")) or as_str(error.get("code")) or "error"], True, {}
    # The image itself (`result`, base64) is never kept: only what it is.
    kept = ("output_format", "size", "quality")
    return [" ".join(s for s in (as_str(item.get(k)) for k in kept) if s)], False, {}


def _mcp_call(item: dict[str, Any]) -> Read:
    error = item.get("error")
    if error is None:
        return [as_str(item.get("output")) or ""], False, {}
    if isinstance(error, str):
        return [error], True, {}
    error = as_dict(error)
    content = error.get("content")  # a tool execution error: the tool's content blocks
    texts = [as_str(as_dict(c).get("text")) or "" for c in as_list(content)]
    text = as_str(error.get("message")) or "\n".join(t for t in texts if t)
    code = as_int(error.get("code"))
    return [text or as_str(error.get("type")) or "error"], True, {"code": code}


def _mcp_list_tools(item: dict[str, Any]) -> Read:
    error = as_str(item.get("error"))
    if error:
        return [error], True, {}
    tools = as_list(item.get("tools"))
    return [as_str(as_dict(t).get("name")) or "" for t in tools], False, {"tools": len(tools)}


def _program_output(item: dict[str, Any]) -> Read:
    return [as_str(item.get("result")) or ""], False, {}


def _shell_output(item: dict[str, Any]) -> Read:
    lines: list[str] = []
    failed, facts = False, {}
    for chunk in map(as_dict, as_list(item.get("output"))):
        lines += [as_str(chunk.get("stdout")) or "", as_str(chunk.get("stderr")) or ""]
        outcome = as_dict(chunk.get("outcome"))
        code = as_int(outcome.get("exit_code"))
        if code is not None:
            facts["exit_code"] = code
        failed = failed or bool(code) or outcome.get("type") == "timeout"
    return lines, failed, facts


def _tool_search_output(item: dict[str, Any]) -> Read:
    tools = item.get("tools")
    return [loaded_tools(tools) or ""], False, {"tools": len(as_list(tools))}


def loaded_tools(tools: Any) -> str | None:
    """The tools a tool search loaded, one name a line (a namespace's as `namespace.name`)."""
    names: list[str] = []
    for tool in map(as_dict, as_list(tools)):
        name = as_str(tool.get("name"))
        inner = [as_str(as_dict(t).get("name")) for t in as_list(tool.get("tools"))]
        if name and tool.get("type") == "namespace" and any(inner):
            names += [f"{name}.{n}" for n in inner if n]
        else:
            names.append(name or as_str(tool.get("type")) or "tool")
    return "\n".join(names) or None


_READERS: dict[str, Callable[[dict[str, Any]], Read]] = {
    "web_search_call": _web_search,
    "file_search_call": _file_search,
    "code_interpreter_call": _code_interpreter,
    "image_generation_call": _image_generation,
    "mcp_call": _mcp_call,
    "mcp_list_tools": _mcp_list_tools,
    "program_output": _program_output,
    "shell_call_output": _shell_output,
    "tool_search_output": _tool_search_output,
}
