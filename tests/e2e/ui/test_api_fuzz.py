"""schemathesis against a live gateway over the demo's runs, from its /api/openapi.json:
values inside and outside each parameter's schema, never a 500, each answer (errors
included) conforming to the document, none slower than a second."""

from __future__ import annotations

import asyncio
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.ui.read_api_schema import ADMIN_TOKEN, AUTH
from tests.processes import serving

pytestmark = [pytest.mark.sqlite, pytest.mark.openapi]

# Cases a mode; LOOPWATCH_FUZZ_EXAMPLES raises it for a longer local run.
EXAMPLES = int(os.environ.get("LOOPWATCH_FUZZ_EXAMPLES", "60"))
SLOWEST_S = 1.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def fuzz(url: str, mode: GenerationMode, derandomize: bool) -> None:
    schema = schemathesis.openapi.from_url(f"{url}/api/openapi.json", headers=AUTH, timeout=30)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=derandomize,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=schema.as_strategy(generation_mode=mode))
    def answers_as_documented(case: schemathesis.Case) -> None:
        response = case.call_and_validate(base_url=url, headers=AUTH, checks=CHECKS, timeout=10)
        assert response.elapsed < SLOWEST_S, f"{case.method} {case.formatted_path}: slow"

    answers_as_documented()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
async def test_the_read_api_holds_under_schemathesis(demo_store: str, mode: GenerationMode) -> None:
    # A fixed seed in CI; LOOPWATCH_FUZZ_RANDOM=1 draws new cases on each run.
    derandomize = os.environ.get("LOOPWATCH_FUZZ_RANDOM") != "1"
    async with serving(LOOPWATCH_DATABASE_URL=demo_store, LOOPWATCH_ADMIN_TOKEN=ADMIN_TOKEN) as gw:
        await asyncio.wait_for(asyncio.to_thread(fuzz, gw.url, mode, derandomize), 240)
