"""Step costs: genai-prices' own figures for real models, configured overrides, unknown models."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import genai_prices.data
import pytest

from gateway.config import PriceOverride
from gateway.items import Billing, Share, Usage
from gateway.protocols.anthropic.messages import ADAPTER as MESSAGES
from gateway.runs.pricing import (
    Cost,
    CostSource,
    Pricer,
    matching_override,
    normalized,
)
from gateway.stream.assembler import Assembler

OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com"
DEEPSEEK = "https://api.deepseek.com"
LOCAL = "http://127.0.0.1:8000/v1"


def library(model: str, provider: str, **usage: int) -> Decimal:
    """genai-prices' own figure, asked through its public calc_price."""
    result = genai_prices.calc_price(genai_prices.Usage(**usage), model, provider_id=provider)
    return result.total_price


def test_gpt_4o_matches_the_library_and_the_list_price() -> None:
    cost = Pricer().cost(Usage(1000, 200, 1200), "gpt-4o", upstream_url=OPENAI)
    assert cost.source is CostSource.GENAI_PRICES
    assert cost.usd == library("gpt-4o", "openai", input_tokens=1000, output_tokens=200)
    assert cost.usd == Decimal("0.0045")  # 1000 x $2.50/M + 200 x $10/M


def test_cached_tokens_are_priced_at_the_cache_rate_not_twice() -> None:
    usage = Usage(prompt_tokens=2000, completion_tokens=300, cached_tokens=1500)
    cost = Pricer().cost(usage, "gpt-4o-mini", upstream_url=OPENAI)
    expected = library(
        "gpt-4o-mini", "openai", input_tokens=2000, cache_read_tokens=1500, output_tokens=300
    )
    assert cost.usd == expected
    # 500 uncached x $0.15/M + 1500 cached x $0.075/M + 300 x $0.60/M
    assert cost.usd == Decimal("0.0003675")


def test_anthropic_cache_reads_and_writes() -> None:
    # As the Anthropic adapter reports it: prompt = input + cache read + cache creation.
    usage = Usage(
        prompt_tokens=1000 + 4000 + 2000,
        completion_tokens=500,
        cached_tokens=4000,
        cache_creation_tokens=2000,
    )
    for model in ("claude-sonnet-4-5", "claude-3-5-sonnet-20241022"):
        cost = Pricer().cost(usage, model, upstream_url=ANTHROPIC)
        expected = library(
            model,
            "anthropic",
            input_tokens=7000,
            cache_read_tokens=4000,
            cache_write_tokens=2000,
            output_tokens=500,
        )
        assert cost.usd == expected, model
    # $3/M input, $0.30/M cache read, $3.75/M cache write, $15/M output
    assert expected == Decimal("0.0192")


def anthropic_usage(use: dict[str, object]) -> tuple[Usage, Billing]:
    """What the Anthropic adapter makes of a response's `usage` (anthropic.types.Usage)."""
    assembler = Assembler()
    body = {"id": "msg_1", "model": "claude-sonnet-4-5", "content": [], "usage": use}
    for delta in MESSAGES.decode_body({**body, "stop_reason": "end_turn"}):
        assembler.feed(delta)
    return assembler.usage, assembler.billing


def test_anthropic_cache_writes_are_priced_at_the_cache_write_price_wherever_reported() -> None:
    top = {"input_tokens": 100, "cache_creation_input_tokens": 2000, "output_tokens": 50}
    # The same writes reported only by the iterations (anthropic.types.beta.BetaUsage).
    iterations = {
        "input_tokens": 100,
        "output_tokens": 50,
        "iterations": [
            {"type": "message", "input_tokens": 100, "output_tokens": 50,
             "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0},
        ],
    }  # fmt: skip
    expected = library(
        "claude-sonnet-4-5",
        "anthropic",
        input_tokens=2100,
        cache_write_tokens=2000,
        output_tokens=50,
    )
    assert expected == Decimal("0.00855")  # 100 x $3/M + 2000 x $3.75/M + 50 x $15/M
    for use in (top, iterations):
        usage, billing = anthropic_usage(use)
        cost = Pricer().cost(usage, "claude-sonnet-4-5", billing=billing, upstream_url=ANTHROPIC)
        assert cost == Cost(expected, CostSource.GENAI_PRICES), use


def test_cache_writes_kept_an_hour_are_priced_at_their_own_rate() -> None:
    usage, billing = anthropic_usage(
        {
            "input_tokens": 100,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 1000,
                "ephemeral_1h_input_tokens": 2000,
            },
            "output_tokens": 50,
        }
    )
    assert billing.cache_write_1h_tokens == 2000
    cost = Pricer().cost(usage, "claude-sonnet-4-5", billing=billing, upstream_url=ANTHROPIC)
    expected = library(
        "claude-sonnet-4-5",
        "anthropic",
        input_tokens=3100,
        cache_write_tokens=3000,
        cache_write_1h_tokens=2000,
        output_tokens=50,
    )
    # 100 x $3/M + 1000 x $3.75/M + 2000 x $6/M + 50 x $15/M
    assert cost.usd == expected == Decimal("0.0168")
    hour = PriceOverride(input=Decimal(1), output=Decimal(1), cache_write_1h=Decimal(10))
    configured = Pricer({"claude-*": hour}).cost(usage, "claude-sonnet-4-5", billing=billing)
    # 100 in + 1000 five-minute writes at the input price, 2000 hour writes x 10, 50 out
    assert configured == Cost(Decimal("0.02115"), CostSource.CONFIG)


def test_web_searches_are_priced_by_the_library_per_request() -> None:
    usage, billing = anthropic_usage(
        {
            "input_tokens": 1000,
            "output_tokens": 200,
            "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 2},
        }
    )
    assert billing.server_tool_requests == {"web_search": 3, "web_fetch": 2}
    cost = Pricer().cost(usage, "claude-sonnet-4-5", billing=billing, upstream_url=ANTHROPIC)
    expected = library(
        "claude-sonnet-4-5", "anthropic", input_tokens=1000, output_tokens=200, web_searches=3
    )
    # 1000 x $3/M + 200 x $15/M + 3 searches x $10/1000; web fetches cost nothing apart.
    assert cost == Cost(expected, CostSource.GENAI_PRICES)
    assert expected == Decimal("0.036")


def test_configured_tool_prices_win_and_a_tool_without_a_price_adds_nothing() -> None:
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=0)
    tools = Billing({"web_search": 4, "web_fetch": 2, "code_execution": 7})
    priced = PriceOverride(
        input=Decimal(1),
        output=Decimal(1),
        server_tool_requests={"web_fetch": Decimal("0.5")},
    )
    pricer = Pricer({"claude-*": priced, "house-model": priced})
    # Tokens and fetches as configured, searches as the library prices them for the model.
    cost = pricer.cost(usage, "claude-sonnet-4-5", billing=tools, upstream_url=ANTHROPIC)
    assert cost == Cost(Decimal("2.04"), CostSource.CONFIG)  # 1 + 2 x 0.5 + 4 x 0.01
    # A model the library does not know: only the configured tool is priced.
    assert pricer.cost(usage, "house-model", billing=tools).usd == Decimal(2)
    # A model without any price stays unknown, whatever its tools would have cost.
    unknown = Pricer().cost(usage, "my-local-model", billing=tools)
    assert unknown == Cost(None, CostSource.UNKNOWN_MODEL)


def test_each_model_that_ran_is_priced_at_its_own_price() -> None:
    """A fallback or an advisor: the iterations name the models that ran in the step."""
    opus, sonnet = Usage(2000, 100, 2100), Usage(1000, 300, 1300)
    billing = Billing(shares=(Share("claude-opus-4-1", opus), Share(None, sonnet)))
    pricer = Pricer()
    cost = pricer.cost(Usage(3000, 400, 3400), "claude-sonnet-4-5", billing=billing)
    each = (pricer.cost(opus, "claude-opus-4-1").usd, pricer.cost(sonnet, "claude-sonnet-4-5").usd)
    assert None not in each
    assert cost == Cost(sum(each, Decimal(0)), CostSource.GENAI_PRICES)
    # Opus: 2000 x $15/M + 100 x $75/M; Sonnet: 1000 x $3/M + 300 x $15/M.
    assert cost.usd == Decimal("0.045")
    # One share of a model without a price: the whole cost is unknown, not the known part.
    odd = Billing(shares=(Share("house-model", opus), Share(None, sonnet)))
    assert pricer.cost(Usage(3000, 400, 3400), "claude-sonnet-4-5", billing=odd).usd is None
    # Every share the step's own model: priced as one.
    same = Billing(shares=(Share(None, opus), Share("claude-sonnet-4-5", sonnet)))
    one = pricer.cost(Usage(3000, 400, 3400), "claude-sonnet-4-5", billing=same)
    assert one == pricer.cost(Usage(3000, 400, 3400), "claude-sonnet-4-5")


def test_reasoning_tokens_are_output_tokens() -> None:
    usage = Usage(prompt_tokens=1000, completion_tokens=5000, reasoning_tokens=4200)
    for model in ("o1", "o3-mini"):
        cost = Pricer().cost(usage, model, upstream_url=OPENAI)
        assert cost.usd == library(model, "openai", input_tokens=1000, output_tokens=5000)
    assert Pricer().cost(usage, "o1").usd == Decimal("0.315")  # $15/M in, $60/M out


def test_deepseek_by_its_address_and_by_its_name() -> None:
    usage = Usage(
        prompt_tokens=3000, completion_tokens=800, cached_tokens=1000, reasoning_tokens=600
    )
    expected = library(
        "deepseek-reasoner",
        "deepseek",
        input_tokens=3000,
        cache_read_tokens=1000,
        output_tokens=800,
    )
    assert Pricer().cost(usage, "deepseek-reasoner", upstream_url=DEEPSEEK).usd == expected
    # A local proxy or an unknown address: the provider is recognised from the model name.
    assert Pricer().cost(usage, "deepseek-reasoner", upstream_url=LOCAL).usd == expected
    assert Pricer().cost(usage, "deepseek-reasoner").usd == expected


def test_dated_model_names_find_their_family() -> None:
    usage = Usage(100, 10)
    dated = Pricer().cost(usage, "gpt-4o-2024-08-06", upstream_url=OPENAI)
    assert dated.usd == library("gpt-4o-2024-08-06", "openai", input_tokens=100, output_tokens=10)
    assert Pricer().cost(usage, "GPT-4o").usd == Pricer().cost(usage, "gpt-4o").usd


def test_unknown_model_costs_none_never_zero() -> None:
    pricer = Pricer()
    for model in ("my-finetune-v7", None, "", "x" * 10_000):
        assert pricer.cost(Usage(10, 10), model) == Cost(None, CostSource.UNKNOWN_MODEL)
    # The provider at that address does not sell the model: unknown, not another's price.
    assert pricer.cost(Usage(10, 10), "gpt-4o", upstream_url=DEEPSEEK).usd is None


def test_no_usage_reported_costs_none() -> None:
    assert Pricer().cost(Usage(), "gpt-4o") == Cost(None, CostSource.NO_USAGE)
    assert Pricer().cost(Usage(total_tokens=10), "gpt-4o").usd is None


def test_usage_counted_apart_is_added_not_rejected() -> None:
    # A provider that reports cache reads outside prompt_tokens, reasoning outside output.
    usage = Usage(prompt_tokens=100, completion_tokens=10, cached_tokens=900, reasoning_tokens=50)
    tokens = normalized(usage)
    assert tokens is not None
    assert (tokens.input, tokens.cache_read, tokens.output) == (1000, 900, 60)
    expected = library(
        "gpt-4o", "openai", input_tokens=1000, cache_read_tokens=900, output_tokens=60
    )
    assert Pricer().cost(usage, "gpt-4o").usd == expected
    negative = Usage(prompt_tokens=-5, completion_tokens=10)
    assert Pricer().cost(negative, "gpt-4o").usd == library(
        "gpt-4o", "openai", input_tokens=0, output_tokens=10
    )


def test_config_price_overrides_the_library() -> None:
    overrides = {
        "gpt-4o*": PriceOverride(input=Decimal(1), output=Decimal(2)),
        "my-*": PriceOverride(
            input=Decimal(4), output=Decimal(8), cached=Decimal(1), cache_write=Decimal(5)
        ),
    }
    pricer = Pricer(overrides)
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000, cached_tokens=500_000)
    # Cached tokens without a cached price pay the input price.
    assert pricer.cost(usage, "gpt-4o", upstream_url=OPENAI) == Cost(Decimal(3), CostSource.CONFIG)
    usage = replace(usage, cache_creation_tokens=250_000)
    # 250k uncached x 4 + 500k cached x 1 + 250k written x 5 + 1M out x 8, per million
    assert pricer.cost(usage, "my-model").usd == Decimal("10.75")
    assert pricer.cost(usage, "claude-3-5-sonnet").source is CostSource.GENAI_PRICES


def test_the_most_specific_glob_wins_then_the_first() -> None:
    a, b, c, d = (PriceOverride(input=Decimal(n), output=Decimal(n)) for n in (1, 2, 3, 4))
    overrides = {"*": a, "gpt-4o*": b, "gpt-4o-mini": c, "gpt-4?-*": d}
    assert matching_override(overrides, "gpt-4o-mini") is c  # exact name
    assert matching_override(overrides, "GPT-4o-Mini") is c  # case-insensitive
    assert matching_override(overrides, "gpt-4o-2024-08-06") is b  # 6 literal chars vs 5
    assert matching_override(overrides, "llama") is a
    assert matching_override({"gpt-*": a, "*-4o": b}, "gpt-4o") is a  # tie: first written
    assert matching_override({}, "gpt-4o") is None


def test_output_price_per_token() -> None:
    pricer = Pricer({"cheap-*": PriceOverride(input=Decimal(1), output=Decimal("0.5"))})
    assert pricer.output_price("gpt-4o", upstream_url=OPENAI) == Decimal(10) / 1_000_000
    assert pricer.output_price("cheap-model") == Decimal("0.5") / 1_000_000
    assert pricer.output_price("no-such-model") is None
    # Tiered prices: the dearest tier bounds what a token may cost.
    sonnet = pricer.output_price("claude-sonnet-4-5", at=datetime(2026, 1, 1, tzinfo=UTC))
    assert sonnet is not None and sonnet > Decimal(15) / 1_000_000


def test_lookups_are_cached_and_bounded() -> None:
    pricer = Pricer(cache_size=2)
    for _ in range(3):
        pricer.cost(Usage(1, 1), "gpt-4o", upstream_url=OPENAI)
    info = pricer.cache_info()
    assert (info.hits, info.misses) == (2, 1)
    for n in range(10):
        pricer.cost(Usage(1, 1), f"unknown-{n}")
    assert pricer.cache_info().currsize == 2


def test_prices_need_no_network() -> None:
    """Any socket use while importing and pricing fails the run."""
    script = """
import socket
def refuse(*args, **kwargs):
    raise SystemExit("network used")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from gateway.items import Usage
from gateway.runs.pricing import Pricer
cost = Pricer().cost(Usage(1000, 200), "gpt-4o", upstream_url="https://api.openai.com/v1")
print(cost.usd)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert Decimal(done.stdout) == Decimal("0.0045")


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5", "deepseek-chat", "o3-mini"])
def test_cost_and_output_price_agree(model: str) -> None:
    """A step of only output tokens costs at most output_price per token."""
    pricer = Pricer()
    price = pricer.output_price(model)
    cost = pricer.cost(Usage(prompt_tokens=0, completion_tokens=1000), model).usd
    assert price is not None and cost is not None
    assert cost <= price * 1000


PROVIDER_URLS = {
    "openai": OPENAI,
    "anthropic": ANTHROPIC,
    "deepseek": DEEPSEEK,
    "google": "https://generativelanguage.googleapis.com/v1beta/openai",
    "mistral": "https://api.mistral.ai/v1",
    "x-ai": "https://api.x.ai/v1",
    "perplexity": "https://api.perplexity.ai",  # prices per request too
    "groq": "https://api.groq.com/openai/v1",
}
USAGES = [
    (Usage(prompt_tokens=1234, completion_tokens=567, cached_tokens=200, reasoning_tokens=100), 0),
    (
        Usage(
            prompt_tokens=250_000,  # past the 200k tier of tiered models
            completion_tokens=4000,
            cached_tokens=100_000,
            cache_creation_tokens=50_000,
        ),
        20_000,  # of the writes, those kept an hour
    ),
    (Usage(prompt_tokens=0, completion_tokens=0), 0),
    (Usage(prompt_tokens=200_000, completion_tokens=10), 0),  # on a tier's start: below it
    (Usage(prompt_tokens=200_001, completion_tokens=10, cached_tokens=1), 0),
]


@pytest.mark.parametrize("provider", sorted(PROVIDER_URLS))
def test_every_model_of_a_provider_costs_what_the_library_says(provider: str) -> None:
    """Fast (affine) and tiered paths alike agree with genai-prices to the last digit."""
    when = datetime(2026, 3, 1, tzinfo=UTC)
    pricer = Pricer()
    catalogue = next(p for p in genai_prices.data.providers if p.id == provider)
    for model in catalogue.models:
        for usage, hour in USAGES:
            tokens = normalized(usage, hour)
            assert tokens is not None
            try:
                expected: Decimal | None = genai_prices.calc_price(
                    genai_prices.Usage(
                        input_tokens=tokens.input,
                        cache_read_tokens=tokens.cache_read,
                        cache_write_tokens=tokens.cache_write,
                        cache_write_1h_tokens=hour,
                        output_tokens=tokens.output,
                        output_reasoning_tokens=tokens.reasoning,
                    ),
                    model.id,
                    provider_id=provider,
                    genai_request_timestamp=when,
                ).total_price
            except (LookupError, ValueError):
                expected = None
            billing = Billing(cache_write_1h_tokens=hour)
            url = PROVIDER_URLS[provider]
            cost = pricer.cost(usage, model.id, billing=billing, upstream_url=url, at=when)
            assert cost.usd == expected, (model.id, usage)
