"""Steering the first run of a continue_as_new chain: the refusal names the newest run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.runtime import steering

from .kit import WAIT, Kit


async def _chain(engine: cairn.Engine) -> tuple[str, str]:
    """A chain continued twice, its newest run waiting for an event: (first, newest)."""
    async with asyncio.timeout(WAIT):
        while True:
            record = await engine.control.record("inbox-0")
            while record.continued_to is not None:
                record = await engine.control.record(record.continued_to)
            if record.run_id != "inbox-0" and record.status == "WAITING":
                return "inbox-0", record.run_id
            await asyncio.sleep(0.005)


def _declare(kit: Kit) -> Any:
    @kit.workflow("steer.inbox")
    async def inbox(n: int) -> Any:
        if n < 2:
            cairn.continue_as_new(n + 1)
        return await cairn.wait_for_event("msg")

    return inbox


@pytest.mark.parametrize("verb", ["cancel", "pause", "resume"])
async def test_steering__a_continued_run_names_the_newest_run_of_its_chain(
    kit: Kit, verb: str
) -> None:
    inbox = _declare(kit)
    async with kit.engine() as engine:
        await engine.start(inbox, 0, run_id="inbox-0")
        first, newest = await _chain(engine)
        with pytest.raises(cairn.RunFinished) as refused:
            await getattr(steering, verb)(engine.control, first)
        assert refused.value.newest == newest
        assert str(refused.value) == f"continued as new: {newest} (WAITING)"
        # Nothing was asked of the newest run; then the chain ends, and that is said.
        assert (await engine.control.record(newest)).control is None
        await engine.send_event(newest, "msg", "done")
        async with asyncio.timeout(WAIT):
            while (await engine.control.record(newest)).status != "COMPLETED":
                await asyncio.sleep(0.005)
        with pytest.raises(cairn.RunFinished) as ended:
            await getattr(steering, verb)(engine.control, first)
    assert ended.value.newest == newest
    assert str(ended.value) == f"continued as new: {newest} (COMPLETED)"
