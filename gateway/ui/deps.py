"""What the read side needs of the gateway's dependencies: settings, the store, a clock
and the install secret."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from sqlalchemy.engine import Engine

from gateway.config import Settings


class ReadDeps(Protocol):
    """Met by the gateway's `Deps`; the read side asks for no more (no upstream, no recorder)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def secret(self) -> bytes: ...  # the install secret: signs a fork's request (`ids.fork_mark`)
