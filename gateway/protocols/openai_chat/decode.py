"""OpenAI Chat Completions responses → neutral deltas: stream chunks and whole bodies.

Tolerates what OpenAI-compatible servers actually send (Mistral, Qwen, Ollama, vLLM,
llama.cpp, OpenRouter, Azure): missing or shifted tool-call indexes, empty ids, comments.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gateway import jsoncodec
from gateway.items import RETURNS, StopReason, Usage
from gateway.opaque import Digests
from gateway.protocols.openai_chat.reasoning import reasoning, thought_signature
from gateway.stream.deltas import (
    Delta,
    EndDelta,
    ErrorDelta,
    FinishDelta,
    MetaDelta,
    RefusalDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallStart,
    UsageDelta,
)
from gateway.stream.sse import SSEEvent

STOP_REASONS = {
    "stop": StopReason.COMPLETED,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.LENGTH,
    "content_filter": StopReason.CONTENT_FILTER,
}


class ChatEventDecoder:
    """Per-stream state: response identity seen so far and the tool-call index map.

    EndDelta comes only from `data: [DONE]`. Servers that close the stream without it
    (some llama.cpp builds and proxies) therefore end as interrupted: a missing marker
    cannot be told apart from a cut connection.
    """

    __slots__ = ("_calls", "_digests", "_id", "_model")

    def __init__(self, digests: Digests) -> None:
        self._digests = digests
        self._id: str | None = None
        self._model: str | None = None
        self._calls: dict[int, _CallIndex] = {}

    def decode(self, event: SSEEvent) -> list[Delta]:
        data = event.data
        if not data.startswith("{"):
            return [EndDelta()] if data.strip() == "[DONE]" else []
        try:
            chunk = jsoncodec.loads(data)
        except ValueError:
            return []  # a broken line must never break the tap
        if not isinstance(chunk, dict):
            return []
        out: list[Delta] = []
        self._meta(chunk, out)
        plain = _plain_text(chunk)
        if plain is not None:  # most of a stream: no more to look at
            if plain[0]:
                out.append(TextDelta(*plain))
            return out
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for position, choice in enumerate(choices):
                if isinstance(choice, dict):
                    self._choice(choice, position, out)
        usage_and_error(chunk, out)
        return out

    def _meta(self, chunk: dict[str, Any], out: list[Delta]) -> None:
        response_id, model = _text(chunk.get("id")), _text(chunk.get("model"))
        # Azure's first chunk has id "" and model ""; report identity once it is known.
        new_id = response_id is not None and self._id is None
        new_model = model is not None and self._model is None
        if new_id or new_model:
            self._id = self._id or response_id
            self._model = self._model or model
            out.append(MetaDelta(response_id=self._id, model=self._model))

    def _choice(self, choice: dict[str, Any], position: int, out: list[Delta]) -> None:
        index = choice.get("index")
        number = index if isinstance(index, int) else position
        delta = choice.get("delta")
        if isinstance(delta, dict):
            message_deltas(delta, number, out, self._digests)
            calls = delta.get("tool_calls")
            if isinstance(calls, list) and calls:
                index_map = self._calls.get(number)
                if index_map is None:
                    index_map = self._calls[number] = _CallIndex()
                for entry in calls:
                    if isinstance(entry, dict):
                        index_map.decode(entry, number, out, self._digests)
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):
                _function_call(legacy, number, out)
        finish(choice, number, out)


def _plain_text(chunk: dict[str, Any]) -> tuple[str, int] | None:
    """Text and choice of a chunk that carries nothing else: one unfinished choice whose delta
    is `content` (and perhaps `role`), no usage or error. None for any other chunk."""
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != (2 if "role" in delta else 1):
        return None
    content, reason = delta.get("content"), choice.get("finish_reason")
    if type(content) is not str or (isinstance(reason, str) and reason):
        return None
    if isinstance(chunk.get("usage"), dict) or chunk.get("error") is not None:
        return None
    index = choice.get("index")
    return content, index if isinstance(index, int) else 0


def call_parts(entry: dict[str, Any], digests: Digests) -> tuple[str | None, Any, dict[str, Any]]:
    """Name, raw arguments and item attrs of a `tool_calls` entry: a function's JSON
    `arguments`, or a custom tool's free-form `input` (`{"type": "custom", "custom": {...}}`);
    the attrs note a thought signature the call carries.
    """
    attrs = thought_signature(entry, digests) if "extra_content" in entry else {}
    custom = entry.get("custom")
    if isinstance(custom, dict) and not isinstance(entry.get("function"), dict):
        return _text(custom.get("name")), custom.get("input"), {"free_form": True, **attrs}
    function = entry.get("function")
    function = function if isinstance(function, dict) else {}
    return _text(function.get("name")), function.get("arguments"), attrs


class _CallIndex:
    """Maps the wire's tool-call indexes to ours (0, 1, 2 ...) so distinct calls never merge.

    Mistral sends no `index` (each entry with an id or name is its own call); some servers
    start at 1 or reuse an index for a second call with a new id or name; continuation
    deltas may repeat the id or send `"id": ""`.
    """

    __slots__ = ("_count", "_ids", "_last", "_names", "_wire")

    def __init__(self) -> None:
        self._wire: dict[int, int] = {}  # wire index → our index
        self._ids: dict[int, str] = {}  # our index → its id
        self._names: dict[int, str] = {}
        self._count = 0
        self._last: int | None = None

    def decode(
        self, entry: dict[str, Any], choice: int, out: list[Delta], digests: Digests
    ) -> None:
        name, raw_arguments, attrs = call_parts(entry, digests)
        call_id = _text(entry.get("id"))
        index, new = self._index_of(entry.get("index"), call_id, name)
        if new or call_id or name or RETURNS in attrs:
            start = ToolCallStart(index=index, call_id=call_id, name=name, choice=choice)
            out.append(start if not attrs else replace(start, attrs=attrs))
        arguments = _arguments(raw_arguments)
        if arguments:
            out.append(ToolCallArgs(index=index, fragment=arguments, choice=choice))

    def _index_of(self, wire: Any, call_id: str | None, name: str | None) -> tuple[int, bool]:
        if isinstance(wire, int) and not isinstance(wire, bool):
            ours = self._wire.get(wire)
            if ours is not None and not self._conflicts(ours, call_id, name):
                return self._continue(ours, call_id, name), False
            ours = self._wire[wire] = self._allocate(call_id, name)
            return ours, True
        if call_id:
            for ours, known in self._ids.items():
                if known == call_id:
                    return self._continue(ours, call_id, name), False
        elif not name and self._last is not None:
            return self._last, False  # no index, id or name: the previous call goes on
        return self._allocate(call_id, name), True

    def _conflicts(self, ours: int, call_id: str | None, name: str | None) -> bool:
        known_id, known_name = self._ids.get(ours), self._names.get(ours)
        return bool(
            (call_id and known_id and call_id != known_id)
            or (name and known_name and name != known_name)
        )

    def _continue(self, ours: int, call_id: str | None, name: str | None) -> int:
        if call_id:
            self._ids.setdefault(ours, call_id)
        if name:
            self._names.setdefault(ours, name)
        self._last = ours
        return ours

    def _allocate(self, call_id: str | None, name: str | None) -> int:
        ours = self._count
        self._count += 1
        return self._continue(ours, call_id, name)


def message_deltas(
    message: dict[str, Any], choice: int, out: list[Delta], digests: Digests
) -> None:
    """Reasoning, text and refusal of a stream delta or a whole message, in that order."""
    reasoning(message, choice, out, digests)
    content = message.get("content")
    if isinstance(content, str):
        if content:
            out.append(TextDelta(content, choice))
    elif isinstance(content, list):
        text = "".join(p["text"] for p in content if isinstance(p, dict) and _is_text_part(p))
        if text:
            out.append(TextDelta(text, choice))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(RefusalDelta(refusal, choice))


def finish(choice: dict[str, Any], number: int, out: list[Delta]) -> None:
    raw = choice.get("finish_reason")
    if isinstance(raw, str) and raw:
        stop = STOP_REASONS.get(raw, StopReason.UNKNOWN)
        out.append(FinishDelta(stop_reason=stop, raw_reason=raw, choice=number))


def usage_and_error(chunk: dict[str, Any], out: list[Delta]) -> None:
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        out.append(UsageDelta(parse_usage(usage)))
    error = chunk.get("error")
    if error is not None:
        parsed = error_fields(error)
        if parsed is not None:
            out.append(ErrorDelta(**parsed))


def parse_usage(usage: dict[str, Any]) -> Usage:
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = _dig_int(prompt_details, "cached_tokens")
    if cached is None:
        # Variants: top-level cached_tokens (some servers), DeepSeek's prompt_cache_hit_tokens.
        cached = _int(usage.get("cached_tokens"))
        if cached is None:
            cached = _int(usage.get("prompt_cache_hit_tokens"))
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        total_tokens=_int(usage.get("total_tokens")),
        cached_tokens=cached,
        reasoning_tokens=_dig_int(completion_details, "reasoning_tokens"),
        # openai.types.CompletionUsage's prompt_tokens_details.cache_write_tokens.
        cache_creation_tokens=_dig_int(prompt_details, "cache_write_tokens"),
    )


def error_fields(error: Any) -> dict[str, Any] | None:
    """{"message","type","code"} from an OpenAI-style error value; strings and lists too."""
    if isinstance(error, list):
        return error_fields(error[0]) if error else None
    if isinstance(error, str):
        return {"message": error, "type": None, "code": None}
    if not isinstance(error, dict):
        return None
    if "error" in error and not isinstance(error.get("message"), str):
        return error_fields(error["error"])  # Google-style [{"error": {...}}]
    message = error.get("message")
    if message is None:
        message = error.get("detail")
    if message is None:
        return None
    code = error.get("code")
    kind = error.get("type")
    return {
        "message": message if isinstance(message, str) else json.dumps(message),
        "type": kind if isinstance(kind, str) else None,
        "code": None if code is None else str(code),
    }


def decode_body(body: Any, digests: Digests) -> list[Delta]:
    """A whole chat.completion body as the deltas its stream would have produced."""
    out: list[Delta] = []
    if not isinstance(body, dict):
        return [EndDelta()]
    response_id, model = _text(body.get("id")), _text(body.get("model"))
    if response_id or model:
        out.append(MetaDelta(response_id=response_id, model=model))
    choices = body.get("choices")
    for position, choice in enumerate(choices if isinstance(choices, list) else []):
        if not isinstance(choice, dict):
            continue
        index = choice.get("index")
        number = index if isinstance(index, int) else position
        message = choice.get("message")
        if isinstance(message, dict):
            message_deltas(message, number, out, digests)
            _whole_calls(message, number, out, digests)
        finish(choice, number, out)
    usage_and_error(body, out)
    out.append(EndDelta())
    return out


def _whole_calls(message: dict[str, Any], choice: int, out: list[Delta], digests: Digests) -> None:
    calls = message.get("tool_calls")
    # Positions, not the `index` some servers add: every entry of a message is its own call.
    for position, entry in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(entry, dict):
            continue
        name, raw_arguments, attrs = call_parts(entry, digests)
        call_id = _text(entry.get("id"))
        out.append(
            ToolCallStart(index=position, call_id=call_id, name=name, choice=choice, attrs=attrs)
        )
        arguments = _arguments(raw_arguments)
        if arguments:
            out.append(ToolCallArgs(index=position, fragment=arguments, choice=choice))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        _function_call(legacy, choice, out)


def _function_call(legacy: dict[str, Any], choice: int, out: list[Delta]) -> None:
    """The deprecated single `function_call`: tool call 0 without an id."""
    name = _text(legacy.get("name"))
    if name:
        out.append(ToolCallStart(index=0, name=name, choice=choice))
    arguments = _arguments(legacy.get("arguments"))
    if arguments:
        out.append(ToolCallArgs(index=0, fragment=arguments, choice=choice))


def _is_text_part(part: dict[str, Any]) -> bool:
    return part.get("type") in ("text", None) and isinstance(part.get("text"), str)


def _arguments(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value)  # a few servers send an object instead of JSON text
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dig_int(container: Any, key: str) -> int | None:
    return _int(container.get(key)) if isinstance(container, dict) else None
