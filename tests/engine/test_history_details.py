"""History details of issue 31, item 6: what a cancel ended reads as ended, on both stores."""

from __future__ import annotations

import asyncio

import pytest

import cairn
from cairn.store.programs import step_tasks
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


@pytest.mark.parametrize("parked", ["event", "task", "child", "sleep"])
async def test_history__a_wait_a_cancel_ended_reads_cancelled(kit: Kit, parked: str) -> None:
    @kit.workflow("details.child")
    async def child() -> None:
        await cairn.wait_for_event("never")

    @kit.workflow("details.parked")
    async def parked_wf(how: str) -> None:
        if how == "event":
            await cairn.wait_for_event("go", timeout="1d")
        elif how == "task":
            await cairn.human_task("approve", title="Approve")
        elif how == "sleep":
            await cairn.sleep("30d")
        else:
            await child()

    async with kit.engine() as engine:
        run = await engine.start(parked_wf, parked)
        await until(engine, run.run_id, "WAITING", "SLEEPING")
        await engine.cancel(run.run_id)
        ended = await until(engine, run.run_id, "CANCELLED")
        history = await engine.history(run.run_id)
    wait = next(e for e in history if e.kind != "cancel")
    # Before: a wait stayed "waiting" (and a sleep "completed") in a run long over.
    assert wait.status == "cancelled", (wait.kind, wait.status)
    assert ended.finished_at is not None and wait.finished_at is not None
    assert wait.finished_at.timestamp() == pytest.approx(ended.finished_at)


async def test_history__a_queued_steps_interrupted_attempt_is_shown(kit: Kit) -> None:
    # Before: a claim whose worker died showed only as `claims: 2` in the report's JSON.
    from cairn.cli import output
    from cairn.representation import runs as run_forms
    from cairn.representation import words

    @kit.step("render", queue="gpu")
    async def render(frame: int) -> int:
        return frame * 10

    @kit.workflow("details.movie")
    async def movie() -> int:
        return await render(2)

    async with kit.engine() as cpu:
        handle = await cpu.start(movie)
        await until(cpu, handle.run_id, "WAITING")
        # A worker of the queue takes the attempt and dies: its lease runs out unrenewed.
        [taken] = await cpu.store.write(step_tasks.claim(["gpu"], "w-dead", lease=0.2, limit=1))
        assert taken.started_at is None or taken.worker_id == "w-dead"
        await asyncio.sleep(0.3)
        async with kit.engine(step_queues=["gpu"], workers=2, claim=False):
            assert await handle.result(timeout=WAIT) == 20
        shown = await run_forms.fetch(cpu.control, handle.run_id)
    [lost] = [a for a in shown.attempts if a["outcome"] == "interrupted"]
    assert (lost["key"], lost["attempt"], lost["worker"]) == ("render#1", 1, "w-dead")
    assert lost["started_at"] is not None and lost["failed_at"] is not None
    assert words.attempt_outcome(lost).startswith("interrupted (worker w-dead, started ")
    console = output.stdout()
    with console.capture() as captured:
        console.print(output.attempts_table(shown.attempts))
    assert "interrupted (worker w-dead" in captured.get()


async def test_history__a_step_check_cancelled_stopped_shows_a_cancelled_attempt(
    kit: Kit,
) -> None:
    # Before: the step had no entry and no attempt: the history showed only where the
    # cancel was delivered, as if the step had never begun.
    from cairn.cli import output
    from cairn.dashboard.ui.timeline import timeline
    from cairn.representation import runs as run_forms
    from cairn.representation import words

    entered = asyncio.Event()

    @kit.step("crunch")
    async def crunch() -> None:
        entered.set()
        while True:
            cairn.check_cancelled()
            await asyncio.sleep(0.002)

    @kit.workflow("details.crunch")
    async def crunching() -> None:
        await crunch()

    async with kit.engine() as engine:
        handle = await engine.start(crunching)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        await handle.cancel()
        with pytest.raises(cairn.RunCancelled):
            await handle.result(timeout=WAIT)
        shown = await run_forms.fetch(engine.control, handle.run_id)
        entries = await engine.history(handle.run_id)
    [stopped] = shown.attempts
    assert (stopped["key"], stopped["attempt"], stopped["outcome"]) == ("crunch#1", 1, "cancelled")
    assert words.attempt_outcome(stopped) == (
        "cancelled: step 'crunch' stopped: its run was cancelled"
    )
    console = output.stdout()
    with console.capture() as captured:
        console.print(output.attempts_table(shown.attempts))
    assert "cancelled: step 'crunch' stopped" in captured.get()
    assert "no retry" in captured.get()
    [cancel, step] = timeline(list(entries), shown.attempts)
    assert (cancel["kind"], step["name"], step["status"]) == ("cancel", "crunch#1", "cancelled")
    assert [t["cancelled"] for t in step["tries"]] == [True]


async def test_history__a_local_failed_attempt_names_its_worker(kit: Kit) -> None:
    # Before: only a step queue's attempts named theirs, so `cairn runs show` could not
    # say where a local step failed.
    calls = 0

    @kit.step("flaky", retries=cairn.Retry(max_attempts=2, delay=0.01))
    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("crm down")
        return "ok"

    @kit.workflow("details.flaky")
    async def flaky_wf() -> str:
        return await flaky()

    async with kit.engine() as engine:
        handle = await engine.start(flaky_wf)
        assert await handle.result(timeout=WAIT) == "ok"
        [failed] = await engine.control.attempts(handle.run_id)
        assert engine.worker is not None
        owner = engine.worker.env.owner
    assert (failed["key"], failed["outcome"]) == ("flaky#1", "failed")
    assert failed["worker"] == owner


async def test_history__an_awaited_childs_result_reads_as_its_value(kit: Kit) -> None:
    @kit.workflow("details.kid")
    async def kid(n: int) -> dict[str, object]:
        return {"n": n, "word": "slept"}

    @kit.workflow("details.word")
    async def word() -> str:
        return "slept"

    @kit.workflow("details.parent")
    async def parent() -> list[object]:
        return [await kid(1), await word()]

    async with kit.engine() as engine:
        run = await engine.start(parent)
        assert await run.result() == [{"n": 1, "word": "slept"}, "slept"]
        history = await engine.history(run.run_id)
    told = [e.result["result"] for e in history if e.kind == "child"]
    # Before: the child's stored text, '{"n": 1, "word": "slept"}' and '"slept"'.
    assert told == [{"n": 1, "word": "slept"}, "slept"]
