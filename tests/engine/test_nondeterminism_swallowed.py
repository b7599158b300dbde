"""A workflow cannot hide a divergence by catching NonDeterminismError."""

from __future__ import annotations

import cairn
from cairn.testing import TestEngine

flags = {"changed": False}


@cairn.step(name="nd.first")
async def first() -> int:
    return 1


@cairn.step(name="nd.other")
async def other() -> int:
    return 2


@cairn.workflow(name="nd.swallow")
async def swallow() -> str:
    try:
        if flags["changed"]:
            await other()
        else:
            await first()
    except Exception:  # careless code that would hide the divergence
        pass
    await cairn.sleep("1h")
    return "done"


async def test_divergence__caught_by_workflow_code_still_fails_the_run() -> None:
    async with TestEngine() as env:
        run = await env.start(swallow)
        await env.settle()
        flags["changed"] = True
        try:
            await env.advance("1h")
            assert await run.status() == cairn.RunStatus.FAILED
            page = await env.list_runs(status="FAILED")
            assert page[0].error is not None
            assert "NonDeterminismError" in page[0].error["type"]
        finally:
            flags["changed"] = False
