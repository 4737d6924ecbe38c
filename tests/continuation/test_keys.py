"""Continuation keys over answers that hold more than text and calls: items of types an adapter
could not type (`other`) at the end of a turn, and provider items recorded as several items
that an `item_reference` names at once."""

from __future__ import annotations

from gateway.continuation.keys import ContinuationKeys, StepRef, resolve_references
from gateway.continuation.recent_steps import RecentSteps
from gateway.items import Item, ItemKind

KEYS = ContinuationKeys(b"k" * 32)
USER = Item(ItemKind.USER, role="user", text="What did the ESA announce?")
LATER = Item(ItemKind.USER, role="user", text="When?")
TEXT = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="A probe.", attrs={"item_ids": ["m1"]})
FUTURE = Item(ItemKind.OTHER, role="assistant", attrs={"type": "hologram"})
RAN = {"executed_by": "provider", "tool_type": "web_search", "item_ids": ["ws_1"]}
SEARCH = Item(
    ItemKind.TOOL_CALL, role="assistant", call_id="ws_1", tool_name="web_search", attrs=RAN
)
FOUND = Item(ItemKind.TOOL_RESULT, role="assistant", call_id="ws_1", text="esa.int", attrs=RAN)


def reference_to(item_id: str) -> Item:
    return Item(ItemKind.OTHER, attrs={"type": "item_reference", "id": item_id})


def keys_of(history: list[Item]) -> list[str]:
    return [boundary.key for boundary in KEYS.scan(history).boundaries]


def test_an_answer_ending_in_an_unknown_item_is_continued_by_its_echo() -> None:
    recorded = KEYS.step_key(KEYS.chain([USER]), [TEXT, FUTURE])
    echoed = KEYS.scan([USER, TEXT, FUTURE, LATER])
    assert recorded in [b.key for b in echoed.boundaries]
    # Its boundary is after the unknown item: only the new user turn is new.
    (position,) = [b.position for b in echoed.boundaries if b.key == recorded]
    assert position == 3
    # An echo that drops the unknown item still continues an answer recorded without it.
    assert KEYS.step_key(KEYS.chain([USER]), [TEXT]) in keys_of([USER, TEXT, FUTURE, LATER])


def test_other_items_outside_an_assistant_turn_make_no_boundary() -> None:
    image = Item(ItemKind.OTHER, role="user", attrs={"type": "input_image"})
    assert len(keys_of([USER, image, TEXT, LATER, image])) == 1


def test_a_reference_stands_for_every_item_recorded_for_it() -> None:
    recent = RecentSteps()
    recent.remember("key", "resp_1", StepRef("t1", "s1", (SEARCH, FOUND, TEXT)))
    references = [reference_to("ws_1"), reference_to("m1")]
    history, unresolved = resolve_references([USER, *references, LATER], recent.output_items)
    assert not unresolved
    assert [(i.kind, i.call_id, i.text) for i in history] == [
        (ItemKind.USER, None, USER.text),
        (ItemKind.TOOL_CALL, "ws_1", None),
        (ItemKind.TOOL_RESULT, "ws_1", "esa.int"),
        (ItemKind.ASSISTANT_TEXT, None, "A probe."),
        (ItemKind.USER, None, LATER.text),
    ]
    recorded = KEYS.step_key(KEYS.chain([USER]), [SEARCH, FOUND, TEXT])
    assert recorded in keys_of(history)


def test_references_to_merged_messages_keep_their_text_once() -> None:
    merged = TEXT.with_changes(attrs={"item_ids": ["m1", "m2"]})
    recent = RecentSteps()
    recent.remember("key", "resp_1", StepRef("t1", "s1", (merged,)))
    references = [
        Item(ItemKind.OTHER, attrs={"type": "item_reference", "id": i}) for i in ("m1", "m2")
    ]
    history, unresolved = resolve_references([USER, *references], recent.output_items)
    assert not unresolved and [i.kind for i in history] == [ItemKind.USER, ItemKind.ASSISTANT_TEXT]
