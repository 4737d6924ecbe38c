"""Builders shared by tests, in one place: import them from `tests.factories`.

fixtures: recorded transcripts; items: typed items; records: steps and refusals; requests:
request bodies per wire protocol; api_json: read-API JSON; agent_run: a long realistic run;
assembled: an assembler's output once its stream ended.
"""

from __future__ import annotations

from tests.factories.agent_run import long_run
from tests.factories.api_json import (
    T_JSON,
    iso_at,
    item_dict,
    step_dict,
    trace_dict,
    violation_dict,
)
from tests.factories.assembled import output_of
from tests.factories.fixtures import FIXTURES, fixture_names, fixture_path, load_fixture
from tests.factories.items import (
    assistant_text,
    instruction,
    reasoning,
    returned_reasoning,
    tool_call,
    tool_result,
    user_text,
)
from tests.factories.records import T0, bare_step, build_step, refusal
from tests.factories.requests import chat_request, messages_request, tool_message, user_message

__all__ = [
    "FIXTURES",
    "T0",
    "T_JSON",
    "assistant_text",
    "bare_step",
    "build_step",
    "chat_request",
    "fixture_names",
    "fixture_path",
    "instruction",
    "iso_at",
    "item_dict",
    "load_fixture",
    "long_run",
    "messages_request",
    "output_of",
    "reasoning",
    "refusal",
    "returned_reasoning",
    "step_dict",
    "tool_call",
    "tool_message",
    "tool_result",
    "trace_dict",
    "user_message",
    "user_text",
    "violation_dict",
]
