"""PostgreSQL only: a step streaming while its worker's replies are lost (a flapping
network, LosingProxy): the reader gets each chunk once, in order, and the step completes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.chaos.proxy import LosingProxy

import cairn
from cairn.store.postgres.store import PostgresStore

from .kit import WAIT, Kit


async def test_stream__an_append_whose_reply_is_lost_reaches_readers_once(pg_url: str) -> None:
    kit = Kit(pg_url)
    _, database = pg_url.rsplit("/", 1)
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=0, kinds=("INSERT",))
    lose = asyncio.Event()
    lost = asyncio.Event()

    @kit.step("speak")
    async def speak(n: int) -> int:
        stream = cairn.stream("tokens")
        await stream.write(0)
        await lose.wait()
        for i in range(1, n):
            await stream.write(i)
            if i == 1:
                await asyncio.sleep(0.2)  # its commit lands alone, and loses its reply
                lost.set()
        await stream.close()
        return n

    @kit.workflow("streams.lost_replies")
    async def flow(n: int) -> int:
        return await speak(n)

    store = PostgresStore(proxy.url(database), retry_for=10.0)
    try:
        async with (
            cairn.Engine(
                proxy.url(database), store=store, registry=kit.registry, poll_interval=0.05
            ) as engine,
            cairn.Engine(pg_url, registry=kit.registry, workers=0) as reader,
        ):
            run = await engine.start(flow, 5, run_id="lost-1")
            values = reader.read_stream(run.run_id, "tokens")
            seen: list[Any] = [await asyncio.wait_for(anext(values), WAIT)]
            proxy.budget = 1
            lose.set()
            await asyncio.wait_for(lost.wait(), WAIT)
            seen += await asyncio.wait_for(_rest(values), WAIT)
            assert await run.result(timeout=WAIT) == 5
    finally:
        proxy.close()
        await store.close()
    assert dict(proxy.lost) == {"INSERT": 1}
    assert seen == [0, 1, 2, 3, 4]


async def _rest(values: Any) -> list[Any]:
    return [value async for value in values]
