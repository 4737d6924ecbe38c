"""Redaction rules: what a secret or personal datum looks like, and the marker it becomes.

Compiled once at import; the redactor runs configured patterns before these built-in ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True, slots=True)
class TextRule:
    """One text rule; `hints` are literals of which one must occur for a match to exist."""

    kind: str
    pattern: re.Pattern[str]
    replacement: Replacement
    hints: tuple[str, ...] = ()

    def apply(self, text: str) -> str:
        # A plain substring test is far cheaper than a regex scan that finds nothing.
        if self.hints:
            for hint in self.hints:
                if hint in text:
                    break
            else:
                return text
        return self.pattern.sub(self.replacement, text)


# An e-mail address is found from its "@": scanning for local parts at every word would
# cost a regex attempt per character.
_EMAIL_DOMAIN = re.compile(
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![\w-])"
)
_EMAIL_LOCAL = re.compile(r"(?<![\w.%+-])[\w.%+-]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class EmailRule(TextRule):
    """`pattern` is the whole address; `apply` finds the domain, then its local part."""

    def apply(self, text: str) -> str:
        if "@" not in text:
            return text
        pieces: list[str] = []
        done = 0
        for domain in _EMAIL_DOMAIN.finditer(text):
            at = domain.start()
            local = _EMAIL_LOCAL.search(text, max(done, at - 64), at)
            if local is None:
                continue
            pieces += (text[done : local.start()], marker(self.kind))
            done = domain.end()
        return "".join(pieces) + text[done:] if pieces else text


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = "".join(char for char in match.group() if char.isdigit())
    return marker("card") if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(char.isdigit() for char in text)
    # E.164 allows at most 15 digits; national forms need 9 so that d-m-yyyy dates stay.
    low = 8 if text[0] == "+" else 9
    return marker("phone") if low <= digits <= 15 else text


# Each pattern opens with a literal or a small character set, and lookbehinds come after
# it ("sk-(?<!…)"): the regex engine then skips ahead in C instead of trying every position.
BUILTIN_RULES = (
    # sk-ant-…, sk-proj-… and legacy sk-… are one rule; "task-sk-<key>" is still redacted
    # because keys are often glued to a name with a hyphen, but "tasksk-…" is a word.
    TextRule(
        "api_key",
        re.compile(r"sk-(?<![A-Za-z0-9]sk-)(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        marker("api_key"),
        ("sk-",),
    ),
    TextRule(
        "aws_key",
        re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        marker("aws_key"),
        ("AKIA", "ASIA"),
    ),
    TextRule(
        "github_token",
        re.compile(r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"),
        marker("github_token"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    TextRule(
        "jwt",
        re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        marker("jwt"),
        ("eyJ",),
    ),
    # A token needs a digit or 20+ characters, so prose such as "bearer of" stays. The word
    # is "Bearer", "bearer" or "BEARER", spelt from one character set ([Bb]) so that the
    # engine skips to a B in C; as `(?:[Bb]earer|BEARER)` it tried every position (3 times slower).
    TextRule(
        "bearer",
        re.compile(
            r"[Bb](?:(?<=b)earer|(?<=B)(?:earer|EARER))(?<![A-Za-z0-9]......)[ \t]+"
            r"(?:(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}|[A-Za-z0-9._~+/-]{20,})=*"
        ),
        "Bearer " + marker("bearer"),
        ("earer", "EARER"),
    ),
    EmailRule(
        "email",
        re.compile(r"(?<![\w.%+-])[\w.%+-]{1,64}" + _EMAIL_DOMAIN.pattern),
        marker("email"),
        ("@",),
    ),
    # Card numbers start with 2-6 (the issuer ranges in use), so millisecond timestamps
    # and snowflake ids, which start with 1, are never candidates; Luhn does the rest.
    TextRule(
        "card",
        re.compile(r"[2-6](?<![\w+.,-][2-6])\d{3}(?:[ -]?\d){9,15}(?![\w-]|[.,]\d)"),
        _card,
    ),
    # Only "+" forms, US forms with one consistent separator (area code and exchange start
    # 2-9, as the numbering plan requires) and trunk-prefixed national forms (0…) are
    # phones: bare digit runs (years, ids, counts, timestamps) never are.
    TextRule(
        "phone",
        re.compile(
            r"\+(?<![\w+.:/-]\+)[1-9]\d{0,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,5}"
            r"(?![\w:-]|[.,]\d)"
        ),
        _phone,
        ("+",),
    ),
    TextRule(
        "phone",
        re.compile(
            r"[(\d](?<![\w+.:/-][(\d])(?:(?<=\()\d{3}\)[ ]?\d{3}[-. ]\d{4}"
            r"|(?<=\d)(?:[ .-]?\(\d{3}\)[ ]?\d{3}[-. ]\d{4}"
            r"|(?<=1)[ .-][2-9]\d{2}(?P<sep1>[-. ])[2-9]\d{2}(?P=sep1)\d{4}"
            r"|(?<=[2-9])\d{2}(?P<sep>[-. ])[2-9]\d{2}(?P=sep)\d{4}"
            r"|(?<=0)\d{1,4}(?P<tsep>[ -])\d{2,8}(?:(?P=tsep)\d{2,4}){0,3}))"
            r"(?![\w:-]|[.,]\d)"
        ),
        _phone,
    ),
)

# Where any built-in rule could match: one of their literals, or a digit (cards and phone
# numbers without a "+"). A text without any of these is left as it is.
TRIGGER = re.compile(
    "|".join(
        [re.escape(hint) for rule in BUILTIN_RULES for hint in rule.hints]
        + [r"\d" for rule in BUILTIN_RULES if not rule.hints][:1]
    )
)
