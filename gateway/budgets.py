"""Budget policy: the limits that apply to a request, and what to say when one is spent.

Limits come from settings, then the API key's configured defaults, then request headers;
each source may only tighten what the one before allowed. The ledger keeps the counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from hashlib import blake2b

from gateway.config import KeyBudget, Settings
from gateway.errors import BadRequest, BudgetExceeded
from gateway.items import Violation, ViolationKind

STEPS_HEADER = "X-Loopwatch-Max-Steps"
TOKENS_HEADER = "X-Loopwatch-Max-Tokens"


@dataclass(frozen=True, slots=True)
class Limits:
    max_steps: int | None = None
    max_tokens: int | None = None

    @property
    def any(self) -> bool:
        return self.max_steps is not None or self.max_tokens is not None


@dataclass(frozen=True, slots=True)
class Reservation:
    """What the ledger granted one request: its step and the tokens held for its answer."""

    trace_id: str
    tokens: int  # completion tokens held in flight (0 without a token budget)
    steps_used: int
    tokens_left: int | None  # after this reservation
    clamp: int | None  # the completion limit to impose, if any


@dataclass(frozen=True, slots=True)
class Spent:
    """The ledger refused: which budget is spent, and the spend."""

    budget: str  # "steps" or "tokens"
    steps_used: int
    tokens_used: int


def _tighter(current: int | None, new: int | None) -> int | None:
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


def key_fingerprint(secret: bytes, api_key: str) -> str:
    """A keyed fingerprint of an API key: lets config name a key without holding it."""
    return blake2b(api_key.encode(), key=secret[:64], digest_size=16).hexdigest()


def client_key(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def key_settings(settings: Settings, secret: bytes, headers: Mapping[str, str]) -> KeyBudget | None:
    if not settings.keys:
        return None
    key = client_key(headers)
    if key is None:
        return None
    fingerprint = key_fingerprint(secret, key)
    return next((k for k in settings.keys if k.key_fingerprint == fingerprint), None)


def limits_for(settings: Settings, key: KeyBudget | None, headers: Mapping[str, str]) -> Limits:
    steps, tokens = settings.max_steps, settings.max_tokens
    if key is not None:
        steps, tokens = _tighter(steps, key.max_steps), _tighter(tokens, key.max_tokens)
    steps = _tighter(steps, _header_limit(headers, STEPS_HEADER))
    tokens = _tighter(tokens, _header_limit(headers, TOKENS_HEADER))
    return Limits(steps, tokens)


def refusal(spent: Spent, limits: Limits) -> tuple[BudgetExceeded, Violation]:
    if spent.budget == "steps":
        kind = ViolationKind.STEP_BUDGET_EXCEEDED
        detail = f"Step budget spent: {spent.steps_used} of {limits.max_steps} steps used."
    else:
        kind = ViolationKind.TOKEN_BUDGET_EXCEEDED
        detail = f"Token budget spent: {spent.tokens_used} of {limits.max_tokens} tokens used."
    error = BudgetExceeded(
        f"Loopwatch refused this request: {detail} This agent run may not call the model again.",
        code=kind.value,
        headers=remaining_headers(limits, spent.steps_used, spent.tokens_used),
    )
    return error, Violation(kind, detail, enforced=True)


def remaining_headers(limits: Limits, steps_used: int, tokens_used: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    if limits.max_steps is not None:
        headers["X-Loopwatch-Steps-Remaining"] = str(max(0, limits.max_steps - steps_used))
    if limits.max_tokens is not None:
        headers["X-Loopwatch-Tokens-Remaining"] = str(max(0, limits.max_tokens - tokens_used))
    return headers


@dataclass(frozen=True, slots=True)
class Settlement:
    reservation: Reservation
    used_tokens: int
