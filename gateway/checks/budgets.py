"""Budget policy: the limits that apply to a request, and what to say when one is spent.

Limits come from settings, then the API key's configured defaults, then request headers;
each source may only tighten what the one before allowed. The ledger keeps the counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from hashlib import blake2b
from typing import TypeVar

from gateway.config import KeyBudget, Settings
from gateway.errors import BadRequest, BudgetExceeded
from gateway.items import Violation, ViolationKind
from gateway.protocols.base import KEY_HEADERS

STEPS_HEADER = "X-Loopwatch-Max-Steps"
TOKENS_HEADER = "X-Loopwatch-Max-Tokens"
COST_HEADER = "X-Loopwatch-Max-Cost-Usd"
DURATION_HEADER = "X-Loopwatch-Max-Duration-S"
COST_REMAINING_HEADER = "X-Loopwatch-Cost-Remaining-Usd"
NANO = Decimal(1_000_000_000)  # the ledger counts dollars in whole nano-dollars
# Plain decimals only: no exponent, sign, "inf" or "nan"; digits bounded so nothing is huge.
_DECIMAL = re.compile(r"\d{1,10}(\.\d{1,9})?")

_BEARER, _OTHER_KEYS = KEY_HEADERS[0], KEY_HEADERS[1:]  # a bearer token, or the key alone


@dataclass(frozen=True, slots=True)
class Limits:
    max_steps: int | None = None
    max_tokens: int | None = None
    max_cost_usd: Decimal | None = None
    max_duration_s: float | None = None

    @property
    def any(self) -> bool:
        return not (
            self.max_steps is None
            and self.max_tokens is None
            and self.max_cost_usd is None
            and self.max_duration_s is None
        )

    @property
    def max_cost_nano(self) -> int | None:
        return None if self.max_cost_usd is None else int(self.max_cost_usd * NANO)


@dataclass(frozen=True, slots=True)
class Reservation:
    """What the ledger granted one request: its step and the tokens held for its answer."""

    trace_id: str
    tokens: int  # completion tokens held in flight (0 without a token budget)
    steps_used: int
    tokens_left: int | None  # after this reservation
    clamp: int | None  # the completion limit to impose, if any
    cost_held_nano: int = 0  # dollars held in flight for the answer (0 without a cost budget)
    cost_left_nano: int | None = None  # after this reservation
    trace_started_at: float | None = None  # epoch seconds of the trace's first request


@dataclass(frozen=True, slots=True)
class Spent:
    """The ledger refused: which budget is spent, and the spend."""

    budget: str  # "steps", "tokens", "cost" or "time"
    steps_used: int
    tokens_used: int
    cost_used_nano: int = 0
    elapsed_s: float = 0.0


_N = TypeVar("_N", int, float, Decimal)


def _tighter(current: _N | None, new: _N | None) -> _N | None:
    if new is None:
        return current
    return new if current is None else min(current, new)


def _header_limit(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise BadRequest(f"{name} must be a whole number of at least 1", param=name)
    return int(raw)


def _header_decimal(headers: Mapping[str, str], name: str, unit: str) -> Decimal | None:
    raw = headers.get(name)
    if raw is None:
        return None
    value = raw.strip()
    if not _DECIMAL.fullmatch(value) or Decimal(value) <= 0:
        raise BadRequest(f"{name} must be a positive number of {unit}, like 2.5", param=name)
    return Decimal(value)


def key_fingerprint(secret: bytes, api_key: str) -> str:
    """A keyed fingerprint of an API key: lets config name a key without holding it."""
    return blake2b(api_key.encode(), key=secret[:64], digest_size=16).hexdigest()


def client_key(headers: Mapping[str, str]) -> str | None:
    """The provider key the client sent (headers are case-insensitive, as aiohttp's)."""
    auth = headers.get(_BEARER, "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    for name in _OTHER_KEYS:
        key = headers.get(name)
        if key:
            return key
    return None


def key_settings(settings: Settings, secret: bytes, headers: Mapping[str, str]) -> KeyBudget | None:
    if not settings.keys:
        return None
    key = client_key(headers)
    if key is None:
        return None
    fingerprint = key_fingerprint(secret, key)
    return next((k for k in settings.keys if k.key_fingerprint == fingerprint), None)


UNLIMITED = Limits()
_LIMIT_HEADERS = (STEPS_HEADER, TOKENS_HEADER, COST_HEADER, DURATION_HEADER)


def limits_for(settings: Settings, key: KeyBudget | None, headers: Mapping[str, str]) -> Limits:
    """Each source tightens the one before; a budget header that does not parse is a 400."""
    steps, tokens = settings.max_steps, settings.max_tokens
    cost, seconds = settings.max_cost_usd, settings.max_duration_s
    unset = steps is None and tokens is None and cost is None and seconds is None
    if unset and key is None and not any(name in headers for name in _LIMIT_HEADERS):
        return UNLIMITED  # the common case: no budget anywhere
    if key is not None:
        steps, tokens = _tighter(steps, key.max_steps), _tighter(tokens, key.max_tokens)
        cost, seconds = _tighter(cost, key.max_cost_usd), _tighter(seconds, key.max_duration_s)
    steps = _tighter(steps, _header_limit(headers, STEPS_HEADER))
    tokens = _tighter(tokens, _header_limit(headers, TOKENS_HEADER))
    cost = _tighter(cost, _header_decimal(headers, COST_HEADER, "US dollars"))
    duration = _header_decimal(headers, DURATION_HEADER, "seconds")
    seconds = _tighter(seconds, None if duration is None else float(duration))
    return Limits(steps, tokens, cost, seconds)


def sets_budget(headers: Mapping[str, str]) -> bool:
    """The request sets a budget of its own (a root's: its tree is held to it)."""
    return any(name in headers for name in _LIMIT_HEADERS)


def tree_limits(settings: Settings, root: Limits | None) -> Limits | None:
    """What a root's whole tree of runs is held to: the budget its own request set, else with
    `tree_budgets` the configured run budgets; None: no tree budget."""
    if root is not None and root.any:
        return root
    if settings.tree_budgets:
        configured = limits_for(settings, None, {})
        return configured if configured.any else None
    return None


def refusal(spent: Spent, limits: Limits) -> tuple[BudgetExceeded, Violation]:
    kind, detail = _spent_detail(spent, limits)
    error = BudgetExceeded(
        f"Loopwatch refused this request: {detail} This agent run may not call the model again.",
        code=kind.value,
        headers=remaining_headers(
            limits, spent.steps_used, spent.tokens_used, cost_used_nano=spent.cost_used_nano
        ),
    )
    return error, Violation(kind, detail, enforced=True)


def _spent_detail(spent: Spent, limits: Limits) -> tuple[ViolationKind, str]:
    if spent.budget == "steps":
        detail = f"Step budget spent: {spent.steps_used} of {limits.max_steps} steps used."
        return ViolationKind.STEP_BUDGET_EXCEEDED, detail
    if spent.budget == "cost":
        used = dollars(Decimal(spent.cost_used_nano) / NANO)
        detail = f"Cost budget spent: ${used} of ${dollars(limits.max_cost_usd)} used."
        return ViolationKind.COST_BUDGET_EXCEEDED, detail
    if spent.budget == "time":
        detail = (
            f"Time budget spent: {spent.elapsed_s:.0f} s of {limits.max_duration_s:g} s "
            "since the run's first request."
        )
        return ViolationKind.TIME_BUDGET_EXCEEDED, detail
    detail = f"Token budget spent: {spent.tokens_used} of {limits.max_tokens} tokens used."
    return ViolationKind.TOKEN_BUDGET_EXCEEDED, detail


def remaining_headers(
    limits: Limits, steps_used: int, tokens_used: int, *, cost_used_nano: int | None = None
) -> dict[str, str]:
    headers: dict[str, str] = {}
    if limits.max_steps is not None:
        headers["X-Loopwatch-Steps-Remaining"] = str(max(0, limits.max_steps - steps_used))
    if limits.max_tokens is not None:
        headers["X-Loopwatch-Tokens-Remaining"] = str(max(0, limits.max_tokens - tokens_used))
    cap = limits.max_cost_nano
    if cap is not None and cost_used_nano is not None:
        headers[COST_REMAINING_HEADER] = dollars(Decimal(max(0, cap - cost_used_nano)) / NANO)
    return headers


def dollars(usd: Decimal | None) -> str:
    """Dollars to the micro-dollar, rounded down, without an exponent: `0.012345`."""
    if usd is None:
        return "unlimited"
    return str(usd.quantize(Decimal("0.000001"), rounding=ROUND_DOWN))


def cost_wanted_nano(
    limits: Limits, wanted_tokens: int | None, output_price: Decimal | None
) -> int | None:
    """Nano-dollars to hold for the answer: 0 without a cost budget or a known output price
    (nothing to clamp by); None when the request sets no completion limit (hold all that
    remains, as the token budget does)."""
    if limits.max_cost_usd is None or output_price is None or output_price <= 0:
        return 0
    if wanted_tokens is None:
        return None
    return math.ceil(wanted_tokens * output_price * NANO)


def token_price_nano(output_price: Decimal | None) -> int:
    """One output token in whole nano-dollars, rounded up (1 when the price is unknown)."""
    if output_price is None or output_price <= 0:
        return 1
    return max(1, math.ceil(output_price * NANO))


def cost_clamp(held_nano: int, output_price: Decimal | None) -> int | None:
    """The completion tokens that the held dollars buy at the model's output price."""
    if output_price is None or output_price <= 0:
        return None
    return int(Decimal(max(held_nano, 0)) / (output_price * NANO))


def tightest(*clamps: int | None) -> int | None:
    """The completion limit to impose when several budgets each give one."""
    known = [clamp for clamp in clamps if clamp is not None]
    return min(known) if known else None


def cost_used_nano(cost_usd: Decimal | None, held_nano: int, usage_known: bool) -> int:
    """What a finished step adds to the trace's spend: its cost; the held dollars when its
    usage never arrived (a cancelled stream); 0 when its model has no known price."""
    if not usage_known:
        return held_nano
    return 0 if cost_usd is None else nano_usd(cost_usd)


def nano_usd(usd: Decimal) -> int:
    """Whole nano-dollars, rounded up: an exact integer a ledger can add in SQL."""
    return math.ceil(usd * NANO)


def counts_as_step(http_status: int | None) -> bool:
    """Whether a recorded step holds a step of its run's budget: a failed attempt (the
    provider answered an error status, or could not be reached and the gateway did) is given
    back when it ends, so a retried 429 takes nothing from the budget."""
    return (http_status or 0) < 400


@dataclass(frozen=True, slots=True)
class Settlement:
    reservation: Reservation
    used_tokens: int
    used_cost_nano: int = 0
    steps_back: int = 0  # 1: the step got no answer (a failed attempt) and is given back
