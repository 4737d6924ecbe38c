"""The requests about a Responses response after its creation that may carry its end: a poll
(`GET /v1/responses/{id}`, as JSON or as a resumed stream) and a cancel
(`POST /v1/responses/{id}/cancel`). Their answers are the Response object or its events.
"""

from __future__ import annotations

_PREFIX = "/v1/responses/"
_CANCEL = "/cancel"


def response_id(method: str, path: str) -> str | None:
    """The response a follow-up request is about; None for any other request."""
    if not path.startswith(_PREFIX):
        return None
    rest = path[len(_PREFIX) :]
    if method == "POST" and rest.endswith(_CANCEL):
        rest = rest[: -len(_CANCEL)]
    elif method != "GET":
        return None
    # `/v1/responses/{id}/input_items` and other sub-resources say nothing of its end.
    return rest if rest and "/" not in rest else None
