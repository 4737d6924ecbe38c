"""The attrs keys and reference markers a wire shape is written with, shared by the side
that records shapes and the side that spells them back."""

from __future__ import annotations

from typing import Any

# `attrs[WIRE]` of the first item a shape covers: {"n": how many items it covers, in order
# from this one, "els": the shapes of the history elements they came from}.
WIRE = "wire"
# A cover of one element spelled the usual way but for a few fields more (`refusal: null`,
# `annotations: []` an SDK echoes back): {"n": …, EXTRA: {field: value}} instead of "els".
EXTRA = "x"
# `attrs[ECHO]` of a step's first new item: the shapes of the previous answer's elements as
# this request echoed them back (a list of WIRE values, in order, covering its items).
ECHO = "wire_echo"
# `attrs[RESPELT]` of a step's first new item: the shapes of the few elements before that
# echo as this request spelled them (clients move cache marks, turn a string into blocks).
RESPELT = "wire_respelt"
# `attrs[OPAQUE]` of a reasoning item whose opaque payloads are kept (`keep_opaque_reasoning`):
# {wire field name: payload}, e.g. {"signature": …}, {"data": …}, {"encrypted_content": …}.
# A shape marks where each went; without it the field is left out.
OPAQUE = "opaque"

# A reference inside a shape: {"$lw": [what, …]}. What: "t" an item's text, "a" its
# arguments as text, "j" its arguments as JSON, "p" lines of its text, "s" a slice of its
# text, "r" readable reasoning (the placeholder), "o" an opaque payload, "m" inline media
# (left out: only its type is recorded), "T" the step's declared tools (a history element
# holding the tools the step stores as its tool set: `request_facts.declared_tools`).
REF = "$lw"

# What stands for readable reasoning text, which is never stored.
REASONING_PLACEHOLDER = "[reasoning not stored]"


# Each kind of item by a letter: a cover notes the kinds it covers ("k"), so that one laid
# over stored items (an echo, a re-spelt turn) is used only where they are those items.
KIND_LETTERS = {
    "instruction": "i",
    "user": "u",
    "assistant_text": "a",
    "tool_call": "c",
    "tool_result": "r",
    "reasoning": "t",
    "refusal": "f",
    "other": "o",
}


def kinds_of(items: Any) -> str:
    return "".join(KIND_LETTERS.get(item.kind.value, "o") for item in items)
