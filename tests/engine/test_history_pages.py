"""engine.history in pages: the same entries as the whole history, retried ones included."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


async def test_history__pages_add_up_to_the_whole_history(kit: Kit) -> None:
    broken = {"flaky": True}
    calls: Counter[str] = Counter()

    @kit.step("hp.step")
    def step(i: int) -> int:
        return i

    @kit.step("hp.flaky")
    def flaky() -> str:
        calls["flaky"] += 1
        if broken["flaky"]:
            raise cairn.FatalError("down")
        return "up"

    @kit.workflow("hp.flow")
    async def flow() -> list[Any]:
        found: list[Any] = [await step(i) for i in range(4)]
        found.append(await flaky())
        found += [await step(i) for i in range(4, 7)]
        return found

    async with kit.engine() as engine:
        run = await engine.start(flow, run_id="hp-1")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        broken["flaky"] = False
        await engine.retry("hp-1")
        assert await run.result(timeout=WAIT) == [0, 1, 2, 3, "up", 4, 5, 6]
        whole = await engine.history("hp-1")
        for size in (1, 2, 3, 5, 100):
            pages, after = [], 0
            while True:
                page = await engine.history("hp-1", after=after, limit=size)
                assert len([e for e in page if not e.superseded]) <= size
                pages += list(page)
                if page.next_after is None:
                    break
                after = page.next_after
            assert pages == list(whole), size
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            await engine.history("hp-1", limit=0)
    assert whole.next_after is None
    assert [(e.seq, e.superseded) for e in whole if e.name == "hp.flaky"] == [(5, True), (5, False)]
