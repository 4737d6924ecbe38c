"""Placement without a store: which trace a request joins, decided from its history, the
recent steps in memory and scripted store answers.

Each row is a scenario: the steps recorded in memory, the request, then the script (each
lookup `decide` must ask for, in order, and the store's answer to it) and the placement it
must reach.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.continuation.keys import ContinuationKeys, StepRef
from gateway.continuation.placement import (
    ByConversation,
    ByHeldState,
    ByResponse,
    Continuing,
    Found,
    Known,
    LastStep,
    NeedsLookup,
    OutputsOf,
    Placed,
    StoredRows,
    decide,
    held_in,
    trace_header,
)
from gateway.continuation.recent_steps import RecentSteps
from gateway.errors import BadRequest
from gateway.items import HELD_STATE, Item, ItemKind

KEYS = ContinuationKeys(b"k" * 32)
USER = Item(ItemKind.USER, role="user", text="list the files")
OTHER_USER = Item(ItemKind.USER, role="user", text="something else")
CALL = Item(ItemKind.TOOL_CALL, role="assistant", call_id="call_1", tool_name="ls", arguments="{}")
# The same call echoed by a framework that rewrites arguments: the key differs, the id stays.
REWRITTEN = CALL.with_changes(arguments='{"path": "."}')
RESULT = Item(ItemKind.TOOL_RESULT, role="tool", call_id="call_1", text="a.txt")
ANSWER = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="done")
# A history that re-renders the step's call as text (no typed call left to pair).
AS_TEXT = Item(ItemKind.ASSISTANT_TEXT, role="assistant", text="I called ls (call_1)")

ECHO = [USER, CALL, RESULT]  # continues step s1 of t1 (input USER, output CALL)
KEY = KEYS.scan(ECHO).boundaries[0].key
REWRITTEN_KEY = KEYS.scan([USER, REWRITTEN, RESULT]).boundaries[0].key
S1 = StepRef("t1", "s1", (CALL,))
S2 = StepRef("t2", "s2", (CALL,))  # the same step in an identical run in parallel
S1B = StepRef("t1", "s1b", (ANSWER,))  # a later step of t1
# A compaction the provider made (its mark), the compact step that made it, and the history
# that goes on from it: the kept user message, the compaction, a new turn.
COMPACTION = Item(ItemKind.OTHER, attrs={"type": "compaction", HELD_STATE: "mark_1"})
S_COMPACT = StepRef("t1", "s_compact", (USER, COMPACTION))
AFTER_COMPACTION = [USER, COMPACTION, OTHER_USER]
EVERYTHING: Callable[[str], bool] = lambda key: True  # noqa: E731
NOTHING: Callable[[str], bool] = lambda key: False  # noqa: E731


@dataclass(frozen=True)
class Step:
    """A step recorded in memory: its input, its reference and its response id."""

    ref: StepRef
    input: tuple[Item, ...] = (USER,)
    response_id: str | None = None
    claimed_by: str | None = None  # the attempt of a request that already continued it
    conversation_id: str | None = None
    held_state: str | None = None


@dataclass(frozen=True)
class Request:
    history: list[Item]
    header: str | None = None
    previous_response_id: str | None = None
    failed: StepRef | None = None
    may_hold: Callable[[str], bool] = EVERYTHING
    conversation_id: str | None = None


@dataclass(frozen=True)
class Case:
    recent: tuple[Step, ...]
    request: Request
    script: list[tuple[NeedsLookup, Any]] = field(default_factory=list)
    placed: Placed | None = None


def remember(steps: tuple[Step, ...]) -> RecentSteps:
    recent = RecentSteps()
    for step in steps:
        state = KEYS.scan(list(step.input)).state
        key = KEYS.step_key(state, list(step.ref.output_items))
        recent.remember(
            key,
            step.response_id,
            step.ref,
            state.hex(),
            conversation_id=step.conversation_id,
            held_state=step.held_state,
        )
        if step.claimed_by is not None:
            recent.claim(step.ref.step_id, step.claimed_by)
    return recent


def answer(found: Found, lookup: NeedsLookup, value: Any) -> None:
    match lookup:
        case ByResponse():
            found.responses[lookup] = value
        case ByConversation():
            found.conversations[lookup] = value
        case ByHeldState():
            found.held_states[lookup] = value
        case OutputsOf():
            found.outputs[lookup] = value
        case Continuing():
            found.continuations[lookup] = value
        case LastStep():
            found.last_steps[lookup] = value


def play(case: Case) -> tuple[RecentSteps, Placed]:
    """Run the decision as the proxy does, checking each lookup against the script."""
    recent, request = remember(case.recent), case.request
    scan = KEYS.scan(request.history)
    attempt = scan.attempt_key("gpt-4o", False)
    known = Known(
        request.header,
        request.previous_response_id,
        request.history,
        scan,
        attempt,
        request.failed,
        request.conversation_id,
        held_in(request.history),
    )
    found = Found()
    for expected, value in case.script:
        assert decide(known, recent, request.may_hold, found) == expected
        answer(found, expected, value)
    decided = decide(known, recent, request.may_hold, found)
    assert isinstance(decided, Placed), f"asked for {decided} beyond the script"
    return recent, decided


CASES = {
    "a first request starts a new trace": Case(
        (), Request([USER], may_hold=NOTHING), placed=Placed(None, 0, None)
    ),
    "the exact echo of a recent step": Case(
        (Step(S1),), Request(ECHO), placed=Placed("t1", 2, S1, claim="s1")
    ),
    "the exact echo of a stored step": Case(
        (),
        Request(ECHO),
        [
            (Continuing((KEY,), ("call_1",)), StoredRows(("t1", "s1", KEY))),
            (OutputsOf("s1"), (CALL,)),
        ],
        Placed("t1", 2, S1, claim="s1"),
    ),
    "a stored step whose outputs the store does not give": Case(
        (),
        Request(ECHO),
        [(Continuing((KEY,), ("call_1",)), StoredRows(("t1", "s1", KEY))), (OutputsOf("s1"), None)],
        Placed("t1", 2, StepRef("t1", "s1"), claim="s1"),
    ),
    "a store that does not answer: a new trace": Case(
        (), Request(ECHO), [(Continuing((KEY,), ("call_1",)), None)], Placed(None, 0, None)
    ),
    "keys and ids the store cannot hold are never looked up": Case(
        (), Request(ECHO, may_hold=NOTHING), placed=Placed(None, 0, None)
    ),
    "call ids a recent step emitted, in a rewritten echo": Case(
        (Step(S1),), Request([USER, REWRITTEN, RESULT]), placed=Placed("t1", 2, S1, claim="s1")
    ),
    "call ids a stored step emitted, in a rewritten echo": Case(
        (),
        Request([USER, REWRITTEN, RESULT]),
        [
            (
                Continuing((REWRITTEN_KEY,), ("call_1",)),
                StoredRows(None, (("call_1", "t1", "s1"),)),
            ),
            (OutputsOf("s1"), (CALL,)),
        ],
        Placed("t1", 2, S1, claim="s1"),
    ),
    "call ids several stored steps emitted name none": Case(
        (),
        Request([USER, REWRITTEN, RESULT]),
        [
            (
                Continuing((REWRITTEN_KEY,), ("call_1",)),
                StoredRows(None, (("call_1", "t1", "s1"), ("call_1", "t2", "s2"))),
            )
        ],
        Placed(None, 0, None),
    ),
    "call ids several recent steps emitted: the store is asked only the keys": Case(
        # Steps of another input (this history begins with none of them).
        (Step(S1, input=(OTHER_USER,)), Step(S2, input=(OTHER_USER,))),
        Request([USER, REWRITTEN, RESULT]),
        [(Continuing((REWRITTEN_KEY,), ()), None)],
        Placed(None, 0, None),
    ),
    "previous_response_id of a recent step": Case(
        (Step(S1, response_id="resp_1"),),
        Request([RESULT], previous_response_id="resp_1"),
        placed=Placed("t1", 0, S1),
    ),
    "previous_response_id of a stored step": Case(
        (),
        Request([RESULT], previous_response_id="resp_1"),
        [(ByResponse("resp_1"), ("t1", "s1")), (OutputsOf("s1"), (CALL,))],
        Placed("t1", 0, S1),
    ),
    "previous_response_id nothing recorded: the other rules apply": Case(
        (),
        Request([RESULT], previous_response_id="resp_9", may_hold=NOTHING),
        [(ByResponse("resp_9"), None)],
        Placed(None, 0, None),
    ),
    "previous_response_id under a header: the header names the trace": Case(
        (Step(S1, response_id="resp_1"),),
        Request([RESULT], header="mine", previous_response_id="resp_1"),
        placed=Placed("mine", 0, S1),
    ),
    "a conversation of a recent step: its newest step is continued": Case(
        (
            Step(S1, conversation_id="conv_1"),
            Step(S1B, input=(OTHER_USER,), conversation_id="conv_1"),
        ),
        Request([RESULT], conversation_id="conv_1"),
        placed=Placed("t1", 0, S1B),
    ),
    "a conversation of a stored step": Case(
        (),
        Request([RESULT], conversation_id="conv_1"),
        [(ByConversation("conv_1"), ("t1", "s1")), (OutputsOf("s1"), (CALL,))],
        Placed("t1", 0, S1),
    ),
    "a conversation nothing recorded: the other rules apply": Case(
        (),
        Request([RESULT], conversation_id="conv_9", may_hold=NOTHING),
        [(ByConversation("conv_9"), None)],
        Placed(None, 0, None),
    ),
    "a conversation under a header: the header names the trace": Case(
        (Step(S1, conversation_id="conv_1"),),
        Request([RESULT], header="mine", conversation_id="conv_1"),
        placed=Placed("mine", 0, S1),
    ),
    "a compaction of a recent step: what follows it is new": Case(
        (Step(S1), Step(S_COMPACT, input=tuple(ECHO), held_state="mark_1")),
        Request(AFTER_COMPACTION),
        placed=Placed("t1", 2, S_COMPACT, claim="s_compact"),
    ),
    "a compaction of a stored step": Case(
        (),
        Request(AFTER_COMPACTION, may_hold=NOTHING),
        [(ByHeldState("mark_1"), ("t1", "s_compact")), (OutputsOf("s_compact"), (USER,))],
        Placed("t1", 2, StepRef("t1", "s_compact", (USER,)), claim="s_compact"),
    ),
    "a compaction nothing recorded: a new trace": Case(
        (),
        Request(AFTER_COMPACTION, may_hold=NOTHING),
        [(ByHeldState("mark_1"), None)],
        Placed(None, 0, None),
    ),
    "a history after a compaction continues its newest step, not the compaction": Case(
        (
            Step(S_COMPACT, input=tuple(ECHO), held_state="mark_1"),
            Step(S1B, input=tuple(AFTER_COMPACTION)),
        ),
        Request([*AFTER_COMPACTION, ANSWER, OTHER_USER]),
        placed=Placed("t1", 4, S1B, claim="s1b"),
    ),
    "a header and a history that continues a step of its trace": Case(
        (Step(S1),), Request(ECHO, header="t1"), placed=Placed("t1", 2, S1)
    ),
    "a header naming another trace: its last stored step is compared": Case(
        (Step(S1),),
        Request(ECHO, header="other"),
        [(LastStep("other"), ("s9", (ANSWER,)))],
        Placed("other", 0, StepRef("other", "s9", (ANSWER,))),
    ),
    "a header of a trace nothing recorded": Case(
        (),
        Request([USER], header="fresh", may_hold=NOTHING),
        [(LastStep("fresh"), None)],
        Placed("fresh", 0, None),
    ),
    "a header whose trace's last step is in memory": Case(
        (Step(S1),), Request([OTHER_USER], header="t1"), placed=Placed("t1", 0, S1)
    ),
    "the retry of a failed first request": Case(
        (),
        Request([USER], failed=StepRef("t1", "s0"), may_hold=NOTHING),
        placed=Placed("t1", 0, None, retry_of="s0"),
    ),
    "the retry of a failed attempt that continues a step": Case(
        (Step(S1),),
        Request(ECHO, failed=StepRef("t1", "s2")),
        placed=Placed("t1", 2, S1, retry_of="s2"),
    ),
    "the retry of a failed attempt under its header": Case(
        (Step(S1),),
        Request(ECHO, header="t1", failed=StepRef("t1", "s2")),
        placed=Placed("t1", 2, S1, retry_of="s2"),
    ),
    "a failed attempt of another trace is no retry under a header": Case(
        (),
        Request([USER], header="t3", failed=StepRef("t1", "s2"), may_hold=NOTHING),
        [(LastStep("t3"), None)],
        Placed("t3", 0, None),
    ),
    "identical runs in parallel: the step no request continues yet": Case(
        (Step(S1, claimed_by="another attempt"), Step(S2)),
        Request(ECHO),
        placed=Placed("t2", 2, S2, claim="s2"),
    ),
    "identical runs in parallel, each continued by another request: a new trace": Case(
        (Step(S1, claimed_by="attempt a"), Step(S2, claimed_by="attempt b")),
        Request(ECHO),
        placed=Placed(None, 0, None),
    ),
    "a history re-rendered as text begins with a step's whole input": Case(
        (Step(S1),),
        Request([USER, AS_TEXT, OTHER_USER]),
        placed=Placed("t1", 1, StepRef("t1", "s1"), claim="s1"),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_placement(case: Case) -> None:
    assert play(case)[1] == case.placed


def test_deciding_changes_nothing_in_memory() -> None:
    """The claim is the caller's to make: deciding twice decides the same."""
    case = CASES["identical runs in parallel: the step no request continues yet"]
    recent, first = play(case)
    found = Found()
    scan = KEYS.scan(ECHO)
    known = Known(None, None, ECHO, scan, scan.attempt_key("gpt-4o", False), None)
    assert decide(known, recent, EVERYTHING, found) == first
    assert recent.claimed_by("s2") is None


@pytest.mark.parametrize("header", [None, "run-1", "a.b_c:d-E9", "x" * 128])
def test_a_trace_header_is_taken_as_it_is(header: str | None) -> None:
    assert trace_header(header) == header


@pytest.mark.parametrize("header", ["", "has space", "x" * 129, "ünïcode", "a/b"])
def test_a_trace_header_that_is_no_trace_id_is_a_bad_request(header: str) -> None:
    with pytest.raises(BadRequest) as refused:
        trace_header(header)
    assert refused.value.param == "X-Loopwatch-Trace-Id"
