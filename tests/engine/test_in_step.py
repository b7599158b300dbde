"""Inside a step's own code, durable primitives are refused (issue 12, item 5).

A step runs once and is not replayed: a sleep, wait or child it started would be written
into the run's history, and the next replay would not meet it (NonDeterminismError). The
calls that only describe the run (progress, columns, cancellation, facts) stay allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


def _calls(kit: Kit) -> dict[str, Callable[[], Any]]:
    @kit.workflow("instep.child")
    async def child() -> str:
        return "child"

    @kit.step("instep.plain")
    async def plain() -> str:
        return "plain"

    return {
        "cairn.sleep()": lambda: cairn.sleep("1s"),
        "cairn.sleep_until()": lambda: cairn.sleep_until(datetime.now(UTC)),
        "cairn.run_step()": lambda: cairn.run_step("inner", lambda: 1),
        "cairn.wait_for_event()": lambda: cairn.wait_for_event("x"),
        "cairn.create_hook()": lambda: cairn.create_hook("h"),
        "cairn.human_task()": lambda: cairn.human_task("t", title="T"),
        "cairn.start_child()": lambda: cairn.start_child(child),
        "cairn.emit()": lambda: cairn.emit("instep.event"),
        "cairn.continue_as_new()": lambda: cairn.continue_as_new(),
        "workflow 'instep.child' (a child run)": lambda: child(),
    }


@pytest.mark.parametrize("sync_step", [False, True], ids=["async-step", "sync-step"])
async def test_in_step__durable_primitives_raise_not_in_run_naming_both(
    kit: Kit, sync_step: bool
) -> None:
    calls = _calls(kit)

    def attempt_all() -> dict[str, str]:
        refused = {}
        for what, call in calls.items():
            try:
                pending = call()
                if hasattr(pending, "close"):
                    pending.close()  # a coroutine that was made: it must not be
                refused[what] = "allowed"
            except cairn.NotInRun as exc:
                refused[what] = str(exc)
        return refused

    if sync_step:

        @kit.step("instep.worker")
        def worker() -> dict[str, str]:
            return attempt_all()
    else:

        @kit.step("instep.worker")
        async def worker() -> dict[str, str]:
            return attempt_all()

    @kit.workflow("instep.flow")
    async def flow() -> dict[str, str]:
        return await worker()

    async with kit.engine() as engine:
        run = await engine.start(flow)
        refused = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    for what, message in refused.items():
        assert message.startswith(f"{what} cannot be called inside step 'instep.worker'"), (
            what,
            message,
        )
        assert "\n" not in message
    assert [h.key for h in history] == ["instep.worker#1"]  # nothing else was recorded


async def test_in_step__descriptive_calls_stay_allowed(kit: Kit) -> None:
    @kit.step("instep.describes")
    def describes() -> str:
        cairn.progress("half way", current=1, total=2)
        cairn.set_columns(order_no="A-1")
        cairn.check_cancelled()
        return cairn.current_run().run_id

    @kit.workflow("instep.describing")
    async def describing() -> str:
        return await describes()

    async with kit.engine() as engine:
        run = await engine.start(describing)
        assert await run.result(timeout=WAIT) == run.run_id
        summary = await run.describe()
    assert summary.columns == {"order_no": "A-1"}
    assert summary.progress is not None and summary.progress["message"] == "half way"
