"""Content codings the gateway reads: gzip and deflate, inflated only up to a bound.

Requests are inflated to be parsed (and forwarded decoded); responses are inflated only for
observing, never for the client (see `gateway.exchange.tap`).
"""

from __future__ import annotations

import zlib
from typing import Any

from gateway.errors import BadRequest, RequestTooLarge, UnsupportedEncoding

IDENTITY = ("", "identity")
INFLATED = ("gzip", "x-gzip", "deflate")


def coding(value: str | None) -> str:
    """A Content-Encoding header's value, normalised ("" for none)."""
    return (value or "").strip().lower()


def decompressor(encoding: str, first: bytes = b"") -> Any:
    """A zlib decompressor for `encoding` (one of INFLATED), given the body's first bytes."""
    if encoding == "deflate" and first and first[0] & 0x0F != 8:
        return zlib.decompressobj(wbits=-15)  # raw deflate, as some clients send it
    return zlib.decompressobj(wbits=47)  # 47: accept a gzip or zlib header


def check_request_coding(value: str | None) -> str:
    """The request's coding if the gateway can read it; 415 otherwise (br, zstd, a chain)."""
    encoding = coding(value)
    if encoding in IDENTITY or encoding in INFLATED:
        return encoding
    raise UnsupportedEncoding(
        f"Request Content-Encoding {value!r} is not supported: send identity, gzip or deflate."
    )


def inflate_request(raw: bytes, encoding: str, limit: int) -> bytes:
    """The decoded request body; 413 past `limit` bytes decoded, however small `raw` is."""
    if encoding in IDENTITY:
        return raw
    inflate = decompressor(encoding, raw[:1])
    try:
        data: bytes = inflate.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise BadRequest(f"Request body is not valid {encoding}: {exc}") from None
    if len(data) > limit or inflate.unconsumed_tail:
        raise RequestTooLarge(f"Request body is larger than {limit} bytes once decoded.")
    if not inflate.eof:
        raise BadRequest(f"Request body is truncated {encoding} data.")
    return data
