"""Admin-token checks for the UI and read API: bearer header or the login cookie.

The cookie holds an expiry and an HMAC of it keyed by the token, never the token itself.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import quote

from aiohttp import web

COOKIE = "loopwatch_session"
SESSION_SECONDS = 7 * 24 * 3600
LOGIN_PATH = "/login"


def _mac(token: str, expires: int) -> str:
    message = f"loopwatch-ui-session:{expires}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def session_value(token: str, *, now: float | None = None) -> str:
    """A cookie value that proves the token was shown, valid for SESSION_SECONDS."""
    expires = int(now if now is not None else time.time()) + SESSION_SECONDS
    return f"{expires}.{_mac(token, expires)}"


def valid_session(token: str, value: str, *, now: float | None = None) -> bool:
    expires_text, _, mac = value.partition(".")
    if not expires_text.isdigit() or not mac:
        return False
    expires = int(expires_text)
    if expires < (now if now is not None else time.time()):
        return False
    return hmac.compare_digest(mac.encode(), _mac(token, expires).encode())


def token_matches(token: str, offered: str) -> bool:
    return hmac.compare_digest(offered.encode(), token.encode())


def authorized(request: web.Request, token: str) -> bool:
    """True when the request shows the token as a bearer header or holds a valid cookie."""
    offered = request.headers.get("Authorization", "")
    if offered.startswith("Bearer ") and token_matches(token, offered[7:]):
        return True
    cookie = request.cookies.get(COOKIE)
    return cookie is not None and valid_session(token, cookie)


def wants_html(request: web.Request) -> bool:
    return "text/html" in request.headers.get("Accept", "")


def safe_next(target: str | None) -> str:
    """A local path to return to after login; anything else (other hosts) becomes '/'."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in target):
        return "/"  # URL parsers drop tabs and newlines: "/\t/evil.example" is "//evil.example"
    return target


def login_redirect(request: web.Request) -> web.HTTPFound:
    return web.HTTPFound(f"{LOGIN_PATH}?next={quote(request.path_qs, safe='')}")


def set_session(response: web.StreamResponse, request: web.Request, token: str) -> None:
    response.set_cookie(
        COOKIE,
        session_value(token),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )


def clear_session(response: web.StreamResponse) -> None:
    response.del_cookie(COOKIE, path="/")
