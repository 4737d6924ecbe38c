"""One llama-index FunctionAgent run, for test_llamaindex.py: run by the python of
.venv-llamaindex (llama-index's OpenAI LLM pins an older openai than the test suite's).

Argument: a JSON object (baseURL, model, stream, question, instructions, and the text each
tool returns with `{city}` in it). Prints one JSON line: the answer and the calls that ran.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai import OpenAI


async def main(config: dict[str, Any]) -> None:
    calls: list[tuple[str, dict[str, str]]] = []
    results: dict[str, str] = config["results"]

    def get_weather(city: str) -> str:
        """The current weather of a city."""
        calls.append(("get_weather", {"city": city}))
        return results["get_weather"].replace("{city}", city)

    def get_time(city: str) -> str:
        """The local time of a city."""
        calls.append(("get_time", {"city": city}))
        return results["get_time"].replace("{city}", city)

    llm = OpenAI(
        model=config["model"],
        api_base=config["baseURL"],
        api_key="sk-test-llamaindex",
        max_retries=0,
        timeout=30,
    )
    agent = FunctionAgent(
        tools=[get_weather, get_time],
        llm=llm,
        system_prompt=config["instructions"],
        streaming=config["stream"],
    )
    handler = agent.run(user_msg=config["question"])
    async for _ in handler.stream_events():
        pass
    response = await handler
    print(json.dumps({"answer": str(response), "calls": calls}))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
