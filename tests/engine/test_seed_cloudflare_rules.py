"""Coming from Cloudflare Workflows (seed 001's rules), in the Python SDK's spelling.

The page's examples are TypeScript; here the same rules through `WorkflowEntrypoint`
and `step.do`: check before a non-idempotent call, state built only from step returns
(in parallel with `asyncio.gather`, across a long sleep that unloads the run), and an
event that a step mutates keeping its original value. On both stores, virtual clock.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import cairn
from cairn.clock import VirtualClock

from .kit import Kit
from .seeds import finish


async def test_cloudflare__check_before_the_non_idempotent_call(kit: Kit) -> None:
    billed: dict[int, float] = {}
    calls: Counter[str] = Counter()

    class Billing(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> Any:
            account = event.payload["account"]

            @step.do(f"bill {account} for this month's plan")
            async def bill() -> Any:
                calls["bill"] += 1
                if account in billed:  # the processor took it before the reply was lost
                    return None
                billed[account] = 10.0
                if calls["bill"] == 1:
                    raise ConnectionError("reply lost after the charge")
                return billed[account]

            return await bill()

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(Billing, {"account": 4021})
        assert await finish(engine, clock, run) is None
        [entry] = await engine.history(run.run_id)
    assert (entry.key, entry.attempts) == ("bill 4021 for this month's plan#1", 2)
    assert billed == {4021: 10.0} and calls["bill"] == 2


async def test_cloudflare__state_from_step_returns_survives_a_long_sleep(kit: Kit) -> None:
    shelf = {"favourite-1": "418", "favourite-2": "503"}
    calls: Counter[str] = Counter()
    chosen: list[Any] = []

    class Favourites(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> Any:
            @step.do("read first favourite")
            async def first() -> str:
                calls["first"] += 1
                return shelf["favourite-1"]

            @step.do("read second favourite")
            async def second() -> str:
                calls["second"] += 1
                return shelf["favourite-2"]

            codes: list[str] = list(await asyncio.gather(first(), second()))
            await step.sleep("💤💤💤💤", "3 hours")

            @step.do("choose a favourite and fetch it")
            async def choose() -> str:
                chosen.append(list(codes))
                return f"https://http.cat/{codes[event.payload['pick']]}"

            return await choose()

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(Favourites, {"pick": 1})
        assert await finish(engine, clock, run, tick=1800) == "https://http.cat/503"
        keys = [h.key for h in await engine.history(run.run_id)]
    assert calls == {"first": 1, "second": 1}  # after the sleep, the journal's returns
    assert chosen == [["418", "503"]]
    assert sorted(keys[:2]) == ["read first favourite#1", "read second favourite#1"]
    assert keys[2:] == ["~sleep:💤💤💤💤#1", "choose a favourite and fetch it#1"]


async def test_cloudflare__state_kept_outside_steps_is_lost_over_a_long_sleep(
    kit: Kit,
) -> None:
    # The page's bad example: a list the steps append to is empty after the sleep,
    # because the steps are not run again after the run was unloaded.
    seen: list[list[str]] = []

    class Forgetful(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> Any:
            codes: list[str] = []

            @step.do("read a favourite")
            async def read() -> None:
                codes.append("200")

            await read()
            await step.sleep("long nap", "3 hours")

            @step.do("look at the list")
            async def look() -> int:
                seen.append(list(codes))
                return len(codes)

            return await look()

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(Forgetful)
        assert await finish(engine, clock, run, tick=1800) == 0
    assert seen == [[]]


async def test_cloudflare__a_mutated_event_keeps_its_original_value(kit: Kit) -> None:
    store = {"ada": "from the store"}

    class Profile(cairn.WorkflowEntrypoint, registry=kit.registry):
        async def run(self, event: Any, step: Any) -> Any:
            @step.do("bad step that mutates the incoming event")
            async def bad() -> None:
                event.payload["data"] = store[event.payload["user"]]

            await bad()

            @step.do("good step that returns state")
            async def good() -> str:
                return store[event.payload["user"]]

            user_data = await good()
            await step.sleep("pause", "1 hour")

            @step.do("following step that uses that state")
            async def following() -> list[str]:
                return [user_data, event.payload["data"]]

            return await following()

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(Profile, {"user": "ada", "data": "original"})
        assert await finish(engine, clock, run, tick=600) == ["from the store", "original"]
