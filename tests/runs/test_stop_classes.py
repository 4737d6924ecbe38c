"""Stop reasons fall in classes every surface reads off the enum: an attempt that broke (a
retry follows it, its span is an error), a stop that fails the run, a final answer, an
answer (in part, if cut) a later request may continue."""

from __future__ import annotations

import pytest

from gateway.items import StopReason as S

# stop: (broke, fails the run, final, answered)
CLASSES = {
    S.COMPLETED: (False, False, True, True),
    S.REFUSAL: (False, False, True, True),
    S.TOOL_CALLS: (False, False, False, True),
    S.UNKNOWN: (False, False, False, True),
    S.PAUSED: (False, False, False, True),  # the turn goes on when the client sends it back
    S.LENGTH: (False, True, False, True),
    S.CONTENT_FILTER: (False, True, False, True),
    S.ERROR: (True, True, False, False),
    S.INTERRUPTED: (True, True, False, True),
    S.CANCELLED: (True, True, False, False),
}


def test_every_stop_reason_has_its_class() -> None:
    assert set(CLASSES) == set(S)


@pytest.mark.parametrize("stop", list(S))
def test_classes(stop: S) -> None:
    assert (stop.broke, stop.fails_run, stop.final, stop.answered) == CLASSES[stop]


def test_stored_values_read_back() -> None:
    assert S.of("length") is S.LENGTH
    assert S.of("a_later_reason") is None
    assert S.of(None) is None
