"""An assembler's output once its stream ended, as the exchange's stop table decides it."""

from __future__ import annotations

from gateway.exchange.stops import Ending, decided, seen_by
from gateway.stream.assembler import Assembled, Assembler


def output_of(assembler: Assembler, *, cancelled: bool = False) -> Assembled:
    """The output once the body ended (or the client left, `cancelled`)."""
    ending = Ending.CLIENT_GONE if cancelled else Ending.BODY_ENDED
    return decided(assembler, seen_by(assembler), ending)
