"""One entry of the read API's route table: what the app mounts and the document says."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

from gateway.ui.deps import ReadDeps

ReadHandler = Callable[[web.Request, ReadDeps], Awaitable[web.StreamResponse]]
JSON = "application/json"


@dataclass(frozen=True)
class ApiRoute:
    method: str
    path: str  # aiohttp's, which is OpenAPI's too: `/api/traces/{trace_id}`
    handler: ReadHandler
    summary: str
    response: type[BaseModel]  # the 200 answer's model
    query: type[BaseModel] | None = None  # its query parameters
    body: type[BaseModel] | None = None  # its JSON request body (a POST's)
    errors: tuple[int, ...] = ()  # statuses answered in the error shape, besides 401
    success: tuple[int, ...] = (200,)  # statuses answered with `response`
    media_type: str = JSON

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)

    @property
    def operation_id(self) -> str:
        return self.handler.__name__.strip("_")
