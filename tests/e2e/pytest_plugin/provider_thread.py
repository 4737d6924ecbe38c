"""The fake provider on an event loop of its own, for tests that run pytest in a subprocess
(which blocks the loop of the test that waits for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.testing.loop_thread import LoopThread
from gateway.testing.served import Served
from tests.fakes.chat import call, completion, usage
from tests.fakes.provider import FakeProvider


class ProviderThread:
    def __init__(self) -> None:
        self.fake = FakeProvider()
        self._thread = LoopThread()
        self._served = Served(self.fake.app, gateway=False)
        self._thread.run(self._served.start())
        self.url = f"{self._served.url}/v1"

    def queue_weather(self, runs: int = 1, city: str = "Paris") -> None:
        for _ in range(runs):
            self.fake.queue(
                completion(tool_calls=[call("call_1", "get_weather", {"city": city})]),
                completion(f"{city} is sunny.", use=usage(90, 12)),
            )

    def close(self) -> None:
        """Stop answering (once: a test may stop it before its teardown does)."""
        if self.url:
            self._thread.run(self._served.stop())
            self._thread.close()
            self.url = ""


@pytest.fixture
def provider_thread() -> Iterator[ProviderThread]:
    provider = ProviderThread()
    yield provider
    provider.close()


@pytest.fixture
def provider_thread() -> Iterator[ProviderThread]:
    provider = ProviderThread()
    yield provider
    provider.close()
