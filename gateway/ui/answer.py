"""A read API answer: the reading validated by its response model and dumped through it,
so the JSON is what the OpenAPI document says (gateway.ui.openapi)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from pydantic import BaseModel


def dumped(model: type[BaseModel], result: Any) -> str:
    """The JSON of `result` as `model` reads it. Keys the reading leaves out (optional ones)
    stay out: the answer is the reading, checked."""
    return model.model_validate(result).model_dump_json(exclude_unset=True)


async def json_answer(model: type[BaseModel], result: Any) -> web.Response:
    """Validated and serialized in a thread: a long trace must not hold up the streams
    being proxied."""
    text = await asyncio.to_thread(dumped, model, result)
    return web.Response(text=text, content_type="application/json")
