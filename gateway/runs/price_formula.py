"""A genai-prices price as a formula: affine in the token counts within each price tier,
its coefficients read from the library's own figures once, so each step costs a few
multiplications instead of a full library calculation (about a millisecond)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from decimal import Decimal

from genai_prices import Usage as CatalogueUsage
from genai_prices.types import ModelPrice, TieredPrices

PROBE_TOKENS = 1_000_000  # output tokens of a probe; input probes sit inside their tier


@dataclass(frozen=True, slots=True)
class Tokens:
    """Usage in genai-prices' convention: `input` includes cache reads and writes,
    `cache_write` those kept for an hour (`cache_write_1h`), `output` reasoning."""

    input: int
    cache_read: int
    cache_write: int
    output: int
    reasoning: int
    cache_write_1h: int = 0


NO_TOKENS = Tokens(0, 0, 0, 0, 0)


def catalogue_usage(tokens: Tokens) -> CatalogueUsage:
    return CatalogueUsage(
        input_tokens=tokens.input,
        cache_read_tokens=tokens.cache_read,
        cache_write_tokens=tokens.cache_write,
        cache_write_1h_tokens=tokens.cache_write_1h,
        output_tokens=tokens.output,
        output_reasoning_tokens=tokens.reasoning,
    )


@dataclass(frozen=True, slots=True)
class Affine:
    """Dollars per request and per token of each kind, within one tier."""

    fixed: Decimal
    input: Decimal  # per uncached prompt token
    cache_read: Decimal
    cache_write: Decimal  # per token written for the shorter time
    output: Decimal  # per non-reasoning output token
    reasoning: Decimal
    cache_write_1h: Decimal  # per token written for an hour

    def cost(self, tokens: Tokens) -> Decimal:
        uncached = tokens.input - tokens.cache_read - tokens.cache_write
        return (
            self.fixed
            + uncached * self.input
            + tokens.cache_read * self.cache_read
            + (tokens.cache_write - tokens.cache_write_1h) * self.cache_write
            + tokens.cache_write_1h * self.cache_write_1h
            + (tokens.output - tokens.reasoning) * self.output
            + tokens.reasoning * self.reasoning
        )


@dataclass(frozen=True, slots=True)
class Formula:
    """genai-prices picks a tier per price by the prompt's size (a tier applies when the
    input tokens exceed its start); between two starts every price is affine."""

    starts: tuple[int, ...]  # every tier start of every price, ascending
    pieces: tuple[Affine, ...]  # one more than starts

    def cost(self, tokens: Tokens) -> Decimal:
        return self.pieces[bisect.bisect_left(self.starts, tokens.input)].cost(tokens)


def formula(prices: ModelPrice) -> Formula | None:
    """The price as a formula, or None when it is not piecewise affine in tokens (a
    per-request price that is itself tiered): such prices go through the library."""
    values = [value for value in vars(prices).values() if value is not None]
    if isinstance(getattr(prices, "requests_kcount", None), TieredPrices):
        return None
    starts = sorted(
        {tier.start for value in values if isinstance(value, TieredPrices) for tier in value.tiers}
    )
    fixed = _total(prices, NO_TOKENS)
    probes = [starts[0] if starts else PROBE_TOKENS] + [start + 1 for start in starts]
    pieces = tuple(_affine(prices, fixed, probe) for probe in probes)
    return Formula(tuple(starts), pieces)


def _affine(prices: ModelPrice, fixed: Decimal, n: int) -> Affine:
    """Coefficients from probes whose input is `n` tokens, all inside one tier."""

    def per_input(**kinds: int) -> Decimal:
        if n == 0:  # a tier of empty prompts: no input token is ever priced in it
            return Decimal(0)
        return (_total(prices, Tokens(**{**_ZERO, "input": n, **kinds})) - fixed) / n

    base = _total(prices, Tokens(n, 0, 0, 0, 0))
    out = _total(prices, Tokens(n, 0, 0, PROBE_TOKENS, 0))
    thought = _total(prices, Tokens(n, 0, 0, PROBE_TOKENS, PROBE_TOKENS))
    return Affine(
        fixed=fixed,
        input=per_input(),
        cache_read=per_input(cache_read=n),
        cache_write=per_input(cache_write=n),
        output=(out - base) / PROBE_TOKENS,
        reasoning=(thought - base) / PROBE_TOKENS,
        cache_write_1h=per_input(cache_write=n, cache_write_1h=n),
    )


_ZERO = {
    "input": 0,
    "cache_read": 0,
    "cache_write": 0,
    "output": 0,
    "reasoning": 0,
    "cache_write_1h": 0,
}


def _total(prices: ModelPrice, tokens: Tokens) -> Decimal:
    return prices.calc_price(catalogue_usage(tokens))["total_price"]
