"""Price formulas read from genai-prices: piecewise affine, equal to the library's figures."""

from __future__ import annotations

import itertools
from decimal import Decimal

from genai_prices.types import ModelPrice, Tier, TieredPrices

from gateway.runs.price_formula import Tokens, catalogue_usage, formula


def library(prices: ModelPrice, tokens: Tokens) -> Decimal:
    return prices.calc_price(catalogue_usage(tokens))["total_price"]


def tokens_grid() -> list[Tokens]:
    grid = []
    for prompt, read, write, out, thought in itertools.product(
        (0, 1, 999, 1000, 1001, 5000), (0, 1), (0, 1), (0, 7), (0, 3)
    ):
        if read + write <= prompt and thought <= out:
            grid.append(Tokens(prompt, read, write, out, thought))
    return grid


def test_tiers_from_zero_and_overlapping_starts() -> None:
    prices = ModelPrice(
        input_mtok=TieredPrices(Decimal(1), [Tier(0, Decimal(2)), Tier(1000, Decimal(4))]),
        output_mtok=TieredPrices(Decimal(3), [Tier(999, Decimal(6))]),
        cache_read_mtok=Decimal("0.5"),
        cache_write_mtok=TieredPrices(Decimal("1.25"), [Tier(1000, Decimal("2.5"))]),
        output_reasoning_mtok=Decimal(9),
        requests_kcount=Decimal("0.2"),
    )
    found = formula(prices)
    assert found is not None and found.starts == (0, 999, 1000)
    for tokens in tokens_grid():
        assert found.cost(tokens) == library(prices, tokens), tokens


def test_flat_prices_are_one_piece() -> None:
    prices = ModelPrice(input_mtok=Decimal("2.5"), output_mtok=Decimal(10))
    found = formula(prices)
    assert found is not None and found.starts == () and len(found.pieces) == 1
    for tokens in tokens_grid():
        assert found.cost(tokens) == library(prices, tokens)


def test_a_tiered_per_request_price_is_left_to_the_library() -> None:
    prices = ModelPrice(
        input_mtok=Decimal(1),
        requests_kcount=TieredPrices(Decimal(1), [Tier(10, Decimal(2))]),
    )
    assert formula(prices) is None
