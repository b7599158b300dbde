"""A durable agent's streamed model output: written to a cairn stream by its request steps.

The model is pydantic-ai's FunctionModel with a stream function (no network); a reader in
the test reads the stream with `engine.read_stream`, on each store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

import cairn
from cairn.contrib.pydantic_ai import CairnAgent

from .kit import WAIT, Gate, Kit


def texts(items: list[Any]) -> list[Any]:
    """The text deltas in a stream's items (and its resets), in order."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, cairn.StreamReset):
            out.append(item)
        elif item["event_kind"] == "part_start" and item["part"]["part_kind"] == "text":
            out.append(item["part"]["content"])
        elif item["event_kind"] == "part_delta" and item["delta"]["part_delta_kind"] == "text":
            out.append(item["delta"]["content_delta"])
    return out


async def read_all(engine: cairn.Engine, run_id: str, name: str = "tokens") -> list[Any]:
    async def collect() -> list[Any]:
        return [item async for item in engine.read_stream(run_id, name)]

    return await asyncio.wait_for(collect(), WAIT)


async def test_agent_stream__a_reader_gets_the_models_deltas_in_order_until_closed(
    kit: Kit,
) -> None:
    deltas = ["The ", "refund ", "is ", "on ", "its ", "way."]

    async def tokens(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for delta in deltas:
            yield delta

    durable = CairnAgent(Agent(FunctionModel(stream_function=tokens), name="writer"))

    @kit.workflow("agent.streamed")
    async def streamed(prompt: str) -> str:
        return (await durable.run(prompt, stream="tokens")).output

    async with kit.engine() as engine:
        run = await engine.start(streamed, "hi", run_id="as-1")
        items = await read_all(engine, "as-1")  # ends at the close
        assert await run.result(timeout=WAIT) == "The refund is on its way."
        history = await engine.history("as-1")

    assert texts(items) == deltas
    assert [h.key for h in history] == ["writer.model_request#1"]


async def test_agent_stream__a_resumed_run_neither_asks_again_nor_streams_twice(
    kit: Kit, gate: Gate
) -> None:
    asked: Counter[int] = Counter()

    async def turns(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        returned = any(
            isinstance(part, ToolReturnPart) for message in messages for part in message.parts
        )
        asked[int(returned)] += 1
        if not returned:
            yield "looking"
            yield {0: DeltaToolCall(name="lookup", json_args="{}", tool_call_id="c1")}
        else:
            yield "found "
            yield "it"

    agent = Agent(FunctionModel(stream_function=turns), name="writer")

    @agent.tool_plain
    async def lookup() -> str:
        return await gate()

    durable = CairnAgent(agent, stream="tokens")

    @kit.workflow("agent.streamed.resume")
    async def resume(prompt: str) -> str:
        return (await durable.run(prompt)).output

    first = kit.engine()
    await first.open()
    await first.start(resume, "find it", run_id="as-2")
    await gate.hold(first)
    async with kit.engine() as second:
        output = await (await second.get("as-2")).result(timeout=WAIT)
        items = await read_all(second, "as-2")

    assert output == "found it"
    assert asked == {0: 1, 1: 1}  # the first turn was replayed, not asked again
    assert texts(items) == ["looking", "found ", "it"]  # each turn's events once


async def test_agent_stream__a_failed_request_is_reset_and_the_retry_streams_again(
    kit: Kit,
) -> None:
    tries: list[int] = []

    async def flaky(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        tries.append(1)
        yield "Hel"
        if len(tries) == 1:
            await asyncio.sleep(0.05)  # let the chunk be stored before the failure
            raise ConnectionError("model went away")
        yield "lo"

    durable = CairnAgent(
        Agent(FunctionModel(stream_function=flaky), name="writer"),
        model_retries=cairn.Retry(max_attempts=2, delay=0),
        stream="tokens",
    )

    @kit.workflow("agent.streamed.retried")
    async def retried(prompt: str) -> str:
        return (await durable.run(prompt)).output

    async with kit.engine() as engine:
        run = await engine.start(retried, "hi", run_id="as-3")
        assert await run.result(timeout=WAIT) == "Hello"
        items = await read_all(engine, "as-3")

    reset = cairn.StreamReset(attempt=1, step_key="writer.model_request#1")
    assert texts(items) == ["Hel", reset, "Hel", "lo"]
