"""What a step cost in USD: configured `[prices."<glob>"]` first, else genai-prices' data.

Offline by design: genai-prices ships its price data inside the package and nothing here
asks for updates. A model without a known price costs None ("unknown_model"), never 0.
What the provider billed beside tokens is priced too: each model's share when several
ran in the step, and the requests of the tools the provider ran, where a price is known.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum

from genai_prices import data_snapshot
from genai_prices.types import ModelInfo, ModelPrice, Provider, TieredPrices

from gateway.config import PriceOverride
from gateway.items import NO_BILLING, Billing, Share, Usage
from gateway.runs.price_formula import Formula, Tokens, catalogue_usage, formula

log = logging.getLogger(__name__)

MILLION = Decimal(1_000_000)
MAX_MODEL_CHARS = 256  # longer names are nobody's model: not looked up
CACHE_SIZE = 1024
# genai-prices' per-thousand price of a tool the provider runs, by the tool's neutral name.
CATALOGUE_TOOL_PRICES = {"web_search": "web_searches_kcount"}
THOUSAND = Decimal(1_000)
# genai-prices keys of output token prices; the dearest one bounds what a token may cost.
OUTPUT_PRICE_KEYS = (
    "output_mtok",
    "output_text_mtok",
    "output_reasoning_mtok",
    "output_text_reasoning_mtok",
)


class CostSource(StrEnum):
    CONFIG = "config"
    GENAI_PRICES = "genai-prices"
    UNKNOWN_MODEL = "unknown_model"  # cost is None
    NO_USAGE = "no_usage"  # the provider reported no token counts: cost is None


@dataclass(frozen=True, slots=True)
class Cost:
    usd: Decimal | None
    source: CostSource


@dataclass(frozen=True, slots=True)
class _Catalogued:
    provider: Provider
    model: ModelInfo


_Price = PriceOverride | _Catalogued | None


def normalized(usage: Usage, cache_write_1h: int | None = None) -> Tokens | None:
    """The step's usage ready to price, or None when the provider reported no counts.

    Loopwatch's `prompt_tokens` includes cached and cache-creation tokens and
    `completion_tokens` includes reasoning tokens. A provider that counted them apart (the
    parts exceed the whole) has them added, so no token is priced twice or not at all.
    `cache_write_1h`: of the cache-creation tokens, those kept for an hour.
    """
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return None
    read, write = _count(usage.cached_tokens), _count(usage.cache_creation_tokens)
    prompt = _count(usage.prompt_tokens)
    if read + write > prompt:
        prompt += read + write
    output, reasoning = _count(usage.completion_tokens), _count(usage.reasoning_tokens)
    if reasoning > output:
        output += reasoning
    return Tokens(prompt, read, write, output, reasoning, min(_count(cache_write_1h), write))


def _count(value: int | None) -> int:
    return max(value or 0, 0)


def override_cost(price: PriceOverride, tokens: Tokens) -> Decimal:
    cached = price.input if price.cached is None else price.cached
    write = price.input if price.cache_write is None else price.cache_write
    hour = write if price.cache_write_1h is None else price.cache_write_1h
    uncached = tokens.input - tokens.cache_read - tokens.cache_write
    total = (
        uncached * price.input
        + tokens.cache_read * cached
        + (tokens.cache_write - tokens.cache_write_1h) * write
        + tokens.cache_write_1h * hour
        + tokens.output * price.output
    )
    return total / MILLION


def matching_override(overrides: Mapping[str, PriceOverride], model: str) -> PriceOverride | None:
    """The override whose glob matches `model` (case-insensitively) most specifically.

    An exact name beats any pattern; among patterns, the one with the most literal
    characters wins; a tie goes to the one written first.
    """
    name = model.lower()
    best: tuple[int, PriceOverride] | None = None
    for glob, price in overrides.items():
        if not fnmatch.fnmatchcase(name, glob.lower()):
            continue
        literal = len(re.sub(r"\[[^\]]*\]|[*?]", "", glob))
        rank = 1 << 20 if glob.lower() == name else literal
        if best is None or rank > best[0]:
            best = (rank, price)
    return None if best is None else best[1]


class Pricer:
    """Prices steps; one per app, safe to share between threads. Lookups are cached per
    (model, upstream), bounded."""

    def __init__(
        self, overrides: Mapping[str, PriceOverride] | None = None, *, cache_size: int = CACHE_SIZE
    ) -> None:
        self._overrides = dict(overrides or {})
        self._lookup = functools.lru_cache(maxsize=cache_size)(self._resolve)
        self._catalogue = functools.lru_cache(maxsize=cache_size)(catalogued)
        self._failed: set[str] = set()
        # By id() of genai-prices' ModelPrice objects, which live as long as its data.
        self._formulas: dict[int, tuple[ModelPrice, Formula | None]] = {}

    def cost(
        self,
        usage: Usage,
        model: str | None,
        *,
        billing: Billing = NO_BILLING,
        upstream_url: str | None = None,
        at: datetime | None = None,
    ) -> Cost:
        """The step's cost. `upstream_url` names the provider when genai-prices knows its
        address; otherwise the provider is recognised from the model name. Each model's
        share of the usage is priced at its own price; a share of a model without one
        makes the whole cost unknown, never partly counted."""
        tokens = normalized(usage, billing.cache_write_1h_tokens)
        if tokens is None:
            return Cost(None, CostSource.NO_USAGE)
        shares = billing.by_model(model)
        cost = self._shares_cost(shares, upstream_url, at) if shares else None
        if cost is None:
            cost = self._tokens_cost(tokens, model, upstream_url, at)
        if cost.usd is None or not billing.server_tool_requests:
            return cost
        tools = self._tools_cost(billing.server_tool_requests, model, upstream_url, at)
        return Cost(cost.usd + tools, cost.source)

    def _shares_cost(
        self, shares: tuple[Share, ...], upstream_url: str | None, at: datetime | None
    ) -> Cost | None:
        total, sources = Decimal(0), set()
        for share in shares:
            tokens = normalized(share.usage, share.cache_write_1h_tokens)
            if tokens is None:
                continue
            cost = self._tokens_cost(tokens, share.model, upstream_url, at)
            if cost.usd is None:
                return cost
            total += cost.usd
            sources.add(cost.source)
        if not sources:
            return None  # no share counted anything: the step's totals decide
        configured = CostSource.CONFIG in sources
        return Cost(total, CostSource.CONFIG if configured else CostSource.GENAI_PRICES)

    def _tools_cost(
        self,
        requests: Mapping[str, int],
        model: str | None,
        upstream_url: str | None,
        at: datetime | None,
    ) -> Decimal:
        """The provider-run tools' requests at their price; a tool without a known price
        (one the provider does not charge apart, one nobody priced) adds nothing."""
        price = self.price(model, upstream_url)
        configured = price.server_tool_requests if isinstance(price, PriceOverride) else {}
        total = Decimal(0)
        for tool, count in requests.items():
            each = configured.get(tool)
            if each is None:
                each = self._catalogue_tool_price(tool, model, upstream_url, at)
            if each is not None:
                total += count * each
        return total

    def _catalogue_tool_price(
        self, tool: str, model: str | None, upstream_url: str | None, at: datetime | None
    ) -> Decimal | None:
        key = CATALOGUE_TOOL_PRICES.get(tool)
        if key is None or not model or len(model) > MAX_MODEL_CHARS:
            return None
        found = self._catalogue(model.lower(), upstream_url)
        if found is None:
            return None
        value = getattr(found.model.get_prices(at or datetime.now(tz=UTC)), key, None)
        return value / THOUSAND if isinstance(value, Decimal) else None

    def _tokens_cost(
        self, tokens: Tokens, model: str | None, upstream_url: str | None, at: datetime | None
    ) -> Cost:
        price = self.price(model, upstream_url)
        if isinstance(price, PriceOverride):
            return Cost(override_cost(price, tokens), CostSource.CONFIG)
        if price is None:
            return Cost(None, CostSource.UNKNOWN_MODEL)
        usd = self._catalogue_cost(price, tokens, at)
        if usd is None:
            return Cost(None, CostSource.UNKNOWN_MODEL)
        return Cost(usd, CostSource.GENAI_PRICES)

    def output_price(
        self, model: str | None, *, upstream_url: str | None = None, at: datetime | None = None
    ) -> Decimal | None:
        """USD per output token at the dearest rate the model may charge (tiers, reasoning),
        or None when unknown: what a cost budget's remaining dollars are divided by."""
        price = self.price(model, upstream_url)
        if isinstance(price, PriceOverride):
            return price.output / MILLION
        if price is None:
            return None
        rates = _output_rates(price.model.get_prices(at or datetime.now(tz=UTC)))
        return max(rates) / MILLION if rates else None

    def price(self, model: str | None, upstream_url: str | None = None) -> _Price:
        if not model or len(model) > MAX_MODEL_CHARS:
            return None
        return self._lookup(model.lower(), upstream_url)

    def cache_info(self) -> functools._CacheInfo:
        return self._lookup.cache_info()

    def _resolve(self, model: str, upstream_url: str | None) -> _Price:
        override = matching_override(self._overrides, model)
        if override is not None:
            return override
        return catalogued(model, upstream_url)

    def _catalogue_cost(
        self, price: _Catalogued, tokens: Tokens, at: datetime | None
    ) -> Decimal | None:
        try:
            prices = price.model.get_prices(at or datetime.now(tz=UTC))
            known = self._formula_for(prices)
            if known is not None:
                return known.cost(tokens)
            return prices.calc_price(catalogue_usage(tokens))["total_price"]
        except (ValueError, ArithmeticError, LookupError) as exc:
            # Normalized usage is consistent, so this is the price data's fault: say it once.
            if price.model.id not in self._failed:
                self._failed.add(price.model.id)
                log.warning("cannot price model %s: %s", price.model.id, exc)
            return None

    def _formula_for(self, prices: ModelPrice) -> Formula | None:
        known = self._formulas.get(id(prices))
        if known is not None and known[0] is prices:
            return known[1]
        found = formula(prices)
        self._formulas[id(prices)] = (prices, found)
        return found


def catalogued(model: str, upstream_url: str | None) -> _Catalogued | None:
    """The provider and model genai-prices knows for this name, or None.

    An upstream whose address genai-prices recognises is the provider (its data lets
    resellers fall back to the original's prices); any other upstream (a local server, a
    proxy) is recognised from the model name, as genai-prices does without an address.
    """
    providers = data_snapshot.get_snapshot().providers
    provider = _provider_by_url(providers, upstream_url) if upstream_url else None
    if provider is None:
        provider = next(
            (p for p in providers if p.model_match is not None and p.model_match.is_match(model)),
            None,
        )
    if provider is None:
        return None
    found = provider.find_model(model, all_providers=providers)
    return None if found is None else _Catalogued(provider, found)


def _provider_by_url(providers: list[Provider], url: str) -> Provider | None:
    return next((p for p in providers if re.match(p.api_pattern, url)), None)


def _output_rates(prices: ModelPrice) -> list[Decimal]:
    rates: list[Decimal] = []
    for key in OUTPUT_PRICE_KEYS:
        value = getattr(prices, key, None)
        if isinstance(value, TieredPrices):
            rates += [value.base, *(tier.price for tier in value.tiers)]
        elif isinstance(value, Decimal):
            rates.append(value)
    return rates
