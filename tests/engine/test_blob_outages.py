"""A blob store that cannot take a blob for a while (full, unwritable, away), on both stores.

Not the value's fault: the step's result is stored once the blob store takes it again,
and the step is not run again (as a database outage is waited out, core/durable.py).
The same for an S3 bucket: tests/engine/test_large_values_s3.py.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.authoring.schedules import make_schedule
from cairn.clock import VirtualClock
from cairn.representation import runs as run_forms
from cairn.representation import words

from .kit import WAIT, Kit
from .test_large_values import blob_dir, blob_files, engine


def unwritable_store(kit: Kit, tmp_path: Path) -> Path:
    """The kit's blob directory, which cannot be written: a file in its place (ENOTDIR)."""
    where = blob_dir(kit, tmp_path)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("not a directory")
    return where


async def until_it_waits_for_the_store(eng: cairn.Engine, run_id: str) -> None:
    """Until the run says it waits for the blob store (not failed meanwhile)."""
    async with asyncio.timeout(WAIT):
        while True:
            record = await eng.control.record(run_id)
            assert record.status in ("PENDING", "RUNNING"), record.error
            if "blob store" in (record.waiting_for or ""):
                return
            await asyncio.sleep(0.02)


async def says_it_waits_for_the_blob_store(eng: cairn.Engine, run_id: str, what: str) -> None:
    """`cairn runs show`, the API and the dashboard (one `fetch`), and RunSummary, say so."""
    async with asyncio.timeout(WAIT):
        while True:
            shown = await run_forms.fetch(eng.control, run_id)
            if shown.waiting is not None and shown.waiting["kind"] == "blobs":
                break
            await asyncio.sleep(0.01)
    reason = shown.waiting["reason"]
    assert reason.startswith(f"cannot store {what}: writing blob ") and "failed: " in reason
    assert run_forms.run_dict(shown)["waiting"]["reason"] == reason  # the API's JSON
    text = words.waiting_text(shown.waiting, now=shown.now, run_id=run_id)
    assert text == f"the blob store to take a value (retried until it does): {reason}"
    summary = await eng.control.describe(run_id)
    assert summary.waiting_for == f"the blob store: {reason}"


async def says_it_no_longer_waits_for_the_blob_store(eng: cairn.Engine, run_id: str) -> None:
    shown = await run_forms.fetch(eng.control, run_id)
    assert shown.waiting is None or shown.waiting["kind"] != "blobs"
    assert "blob store" not in ((await eng.control.record(run_id)).waiting_for or "")


async def test_blob_outage__a_step_result_waits_for_the_blob_store_and_runs_once(
    kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    @kit.step("big.unwritable")
    def produce() -> str:
        calls.append(1)
        return "u" * 10_000

    @kit.workflow("big.outage")
    async def outage() -> int:
        return len(await produce())

    where = unwritable_store(kit, tmp_path)
    caplog.set_level(logging.WARNING, logger="cairn.executor")
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(outage)
        async with asyncio.timeout(WAIT):
            while not any("until the blob store" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a few more tries
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        await says_it_waits_for_the_blob_store(eng, run.run_id, "result of step 'big.unwritable'")
        where.unlink()  # the operator frees the blob store
        assert await run.result(timeout=WAIT) == 10_000
        await says_it_no_longer_waits_for_the_blob_store(eng, run.run_id)
        [entry] = await eng.history(run.run_id)
    assert calls == [1]  # the step ran once: its result waited, not the step
    assert entry.status == "completed" and entry.result["offloaded"]["size"] == 10_002
    assert len(blob_files(where)) == 1
    [warned] = [r.getMessage() for r in caplog.records if "until the blob store" in r.getMessage()]
    assert warned.startswith(f"run {run.run_id}: cannot store result of step 'big.unwritable': ")
    assert warned.endswith("; retrying until the blob store takes it") and "\n" not in warned


async def test_blob_outage__a_workflow_result_waits_for_the_blob_store(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("big.outage_result")
    async def outage_result() -> str:
        return "r" * 10_000

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(outage_result)
        await asyncio.sleep(0.5)
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        what = "result of workflow 'big.outage_result'"
        await says_it_waits_for_the_blob_store(eng, run.run_id, what)
        where.unlink()
        assert await run.result(timeout=WAIT) == "r" * 10_000
        await says_it_no_longer_waits_for_the_blob_store(eng, run.run_id)


async def test_blob_outage__start_outside_a_run_still_refuses_in_one_line(
    kit: Kit, tmp_path: Path
) -> None:
    # Outside a run there is no attempt to wait in: the caller is told, and nothing is
    # stored (a start or send_event it can retry).
    @kit.workflow("big.outage_args")
    async def outage_args(text: str) -> int:
        return len(text)

    unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB", workers=0) as eng:
        with pytest.raises(cairn.SerializationError) as caught:
            await eng.start(outage_args, "a" * 10_000)
    assert str(caught.value).startswith("cannot store arguments of workflow 'big.outage_args': ")
    assert "\n" not in str(caught.value)


async def test_blob_outage__a_cancel_is_not_held_up_by_the_wait(kit: Kit, tmp_path: Path) -> None:
    calls: list[int] = []

    @kit.step("big.cancel_step")
    def produce() -> str:
        calls.append(1)
        return "c" * 10_000

    @kit.workflow("big.cancel_outage")
    async def cancel_outage() -> int:
        return len(await produce())

    unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(cancel_outage)
        async with asyncio.timeout(WAIT):
            while not calls:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)  # the blob store is still unwritable
    assert calls == [1]  # cancelled at the step, not run again


async def test_blob_outage__a_step_queue_result_waits_for_the_blob_store_and_runs_once(
    kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The result of a step on a step queue is stored by the queue's worker, through its
    # report: a blob store that refuses it must be waited out there too, the step not
    # failed for good nor run again (docs/howto/step-queues.md).
    calls: list[int] = []

    @kit.step("big.remote_unwritable", queue="gpu")
    def produce() -> str:
        calls.append(1)
        return "q" * 10_000

    @kit.workflow("big.remote_outage")
    async def remote_outage() -> int:
        return len(await produce())

    where = unwritable_store(kit, tmp_path)
    caplog.set_level(logging.WARNING, logger="cairn.step_worker")
    async with engine(kit, tmp_path, inline_limit="1KiB", step_queues=["gpu"]) as eng:
        run = await eng.start(remote_outage)
        async with asyncio.timeout(WAIT):
            while not any("until the blob store" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a few more tries
        assert (await eng.control.record(run.run_id)).status == "WAITING"  # not failed
        await says_it_waits_for_the_blob_store(
            eng, run.run_id, "result of step 'big.remote_unwritable'"
        )
        where.unlink()  # the operator frees the blob store
        assert await run.result(timeout=WAIT) == 10_000
        await says_it_no_longer_waits_for_the_blob_store(eng, run.run_id)
        history = await eng.history(run.run_id)
    assert calls == [1]  # the step ran once: its result waited, not the step
    [entry] = [e for e in history if e.key == "big.remote_unwritable#1"]
    assert entry.status == "completed" and entry.result["offloaded"]["size"] == 10_002
    warned = [r.getMessage() for r in caplog.records if "until the blob store" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].startswith(
        f"run {run.run_id}: cannot store result of step 'big.remote_unwritable': "
    )
    assert warned[0].endswith("; retrying until the blob store takes it") and "\n" not in warned[0]


async def test_blob_outage__a_cancel_ends_a_step_queue_wait(kit: Kit, tmp_path: Path) -> None:
    # The queue's worker waits under its claim; the run's cancel ends the claim at its
    # next renewal, and the wait with it: the run ends CANCELLED, the step ran once.
    calls: list[int] = []

    @kit.step("big.remote_cancel_step", queue="gpu")
    def produce() -> str:
        calls.append(1)
        return "c" * 10_000

    @kit.workflow("big.remote_cancel")
    async def remote_cancel() -> int:
        return len(await produce())

    unwritable_store(kit, tmp_path)
    options: dict[str, Any] = {"inline_limit": "1KiB", "step_queues": ["gpu"], "lease": 0.6}
    async with engine(kit, tmp_path, **options) as eng:
        run = await eng.start(remote_cancel)
        await says_it_waits_for_the_blob_store(
            eng, run.run_id, "result of step 'big.remote_cancel_step'"
        )
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)  # the blob store is still unwritable
        async with asyncio.timeout(WAIT):
            while eng.step_worker is not None and eng.step_worker.active:
                await asyncio.sleep(0.05)  # the worker let the attempt go
        await says_it_no_longer_waits_for_the_blob_store(eng, run.run_id)
    assert calls == [1]


async def test_blob_outage__a_step_queue_steps_arguments_wait_for_the_blob_store(
    kit: Kit, tmp_path: Path
) -> None:
    # Large arguments of a step on a step queue are stored by the run before the queue's
    # worker is handed the attempt: not the run's failure either.
    calls: list[int] = []

    @kit.step("big.remote_args", queue="gpu")
    def measure(text: str) -> int:
        calls.append(1)
        return len(text)

    @kit.workflow("big.remote_args_flow")
    async def remote_args() -> int:
        return await measure("a" * 10_000)

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB", step_queues=["gpu"]) as eng:
        run = await eng.start(remote_args)
        await says_it_waits_for_the_blob_store(
            eng, run.run_id, "the arguments of step 'big.remote_args'"
        )
        await asyncio.sleep(0.3)  # a few more tries
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        where.unlink()
        assert await run.result(timeout=WAIT) == 10_000
    assert calls == [1]


HANDED_ON = [
    "child",
    "emit",
    "human_task",
    "continue_as_new",
    "schedule_workflow",
    "schedule_workflow_sync",
    "stream_in_step",
    "stream_in_sync_step",
    "stream_in_workflow",
]


@pytest.mark.parametrize("what", HANDED_ON)
async def test_blob_outage__large_values_a_run_hands_on_wait_for_the_blob_store(
    kit: Kit, tmp_path: Path, what: str
) -> None:
    # A child's arguments, an emitted payload, a human task's data, the arguments of
    # continue_as_new or of a run it schedules (cairn.schedule_workflow, from async and
    # sync code), a stream's chunk (from a step or workflow code): stored by the run,
    # waited out like its steps' results.
    big = "v" * 10_000
    calls: list[str] = []

    @kit.step("big.streaming")
    async def streaming() -> int:
        calls.append("step")
        stream = cairn.stream("tokens")
        await stream.write(big)
        await stream.close()
        return 1

    @kit.step("big.streaming_sync")
    def streaming_sync() -> int:
        calls.append("step")
        stream = cairn.stream("tokens")
        stream.write_sync(big)
        stream.close_sync()
        return 1

    @kit.workflow("big.schedules_sync")
    def schedules_sync() -> str:
        return str(cairn.schedule_workflow(child, big))

    @kit.workflow("big.handed_child")
    async def child(text: str) -> int:
        return len(text)

    @kit.workflow("big.handed_on", on="big.handed")
    async def handed_on(payload: str) -> int:
        return len(payload)

    @kit.workflow("big.hands_on")
    async def hands_on(text: str = "") -> Any:
        if text:  # the successor of continue_as_new
            return len(text)
        if what == "child":
            return await child(big)
        if what == "emit":
            return len(await cairn.emit("big.handed", big))
        if what == "human_task":
            try:
                return await cairn.human_task("review", title="t", data=big, timeout="1s")
            except cairn.EventTimeout:
                return 7
        if what == "schedule_workflow":
            return await cairn.schedule_workflow(child, big)
        if what == "stream_in_step":
            return await streaming()
        if what == "stream_in_sync_step":
            return await streaming_sync()
        if what == "stream_in_workflow":
            stream = cairn.stream("tokens")
            await stream.write(big)
            await stream.close()
            return 1
        cairn.continue_as_new(big)
        return None

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(schedules_sync if what == "schedule_workflow_sync" else hands_on)
        await until_it_waits_for_the_store(eng, run.run_id)
        await asyncio.sleep(0.3)  # a few more tries: not failed
        assert (await eng.control.record(run.run_id)).status == "RUNNING"
        where.unlink()
        result = await run.result(timeout=WAIT)
        if what.startswith("schedule_workflow"):  # the id of the run it started
            result = await (await eng.get(result)).result(timeout=WAIT)
        chunks = [value async for value in eng.read_stream(run.run_id, "tokens")]
    expected = {"child": 10_000, "emit": 1, "human_task": 7, "continue_as_new": 10_000}
    assert result == expected.get(what.removesuffix("_sync"), 10_000 if "schedule" in what else 1)
    assert chunks == ([big] if what.startswith("stream") else [])
    assert calls == (["step"] if "step" in what else [])  # the step ran once


@pytest.mark.parametrize("what", ["schedule_workflow", "stream_in_step", "stream_in_workflow"])
async def test_blob_outage__a_cancel_ends_the_wait_for_a_value_handed_on(
    kit: Kit, tmp_path: Path, what: str
) -> None:
    # While the blob store does not take the value, a cancel is met at once: in a step's
    # code as check_cancelled() there would be, else at the call's durable point (the
    # attempt unwinds and the replay meets it there). The cleanup runs; nothing is stored.
    calls: list[str] = []

    @kit.workflow("big.cancel_child")
    async def child(text: str) -> int:
        return len(text)

    @kit.step("big.cancel_streaming")
    async def streaming() -> int:
        calls.append("step")
        try:
            await cairn.stream("tokens").write("s" * 10_000)
        finally:
            calls.append("step cleanup")
        return 1

    @kit.workflow("big.cancel_hands_on")
    async def hands_on() -> Any:
        try:
            if what == "schedule_workflow":
                return await cairn.schedule_workflow(child, "s" * 10_000)
            if what == "stream_in_step":
                return await streaming()
            await cairn.stream("tokens").write("s" * 10_000)
            return 1
        except cairn.Cancelled:
            calls.append("cleanup")
            raise

    unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(hands_on)
        await until_it_waits_for_the_store(eng, run.run_id)
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)  # the blob store is still unwritable
        record = await eng.control.record(run.run_id)
        chunks = [value async for value in eng.read_stream(run.run_id, "tokens")]
        started = await eng.list_runs(workflow="big.cancel_child")
    assert record.status == "CANCELLED" and record.waiting_for is None
    steps = ["step", "step cleanup"] if what == "stream_in_step" else []
    assert calls == [*steps, "cleanup"]  # the step ran once; each cleanup ran
    assert chunks == [] and list(started) == []


async def test_blob_outage__a_schedules_arguments_wait_for_the_blob_store_no_tick_lost_or_doubled(
    kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A schedule declared in code with large arguments, the blob store unwritable at
    # start-up: the engine starts all the same (before, its start failed), the schedule is
    # stored once the store takes them, and the tick due meanwhile starts one run.
    start = 1_750_000_020.0  # on a minute
    clock = VirtualClock(start + 5)

    @kit.workflow("big.ticked")
    async def ticked(text: str) -> int:
        return len(text)

    @kit.workflow("big.other")
    async def other() -> str:
        return "ran"

    make_schedule(ticked, every="1m", args=("t" * 10_000,), reg=kit.registry)
    where = unwritable_store(kit, tmp_path)
    caplog.set_level(logging.INFO, logger="cairn.scheduler")
    async with engine(kit, tmp_path, inline_limit="1KiB", clock=clock, lease="30d") as eng:
        assert await (await eng.start(other)).result(timeout=WAIT) == "ran"  # runs go on
        assert await eng.schedules.list() == []  # not stored yet
        clock.advance(60)  # its first tick comes due while the store is away
        assert eng.scheduler is not None
        await eng.scheduler.run_due()
        assert list(await eng.list_runs(workflow="big.ticked")) == []
        where.unlink()  # the blob store takes blobs again
        async with asyncio.timeout(WAIT):
            while not list(await eng.list_runs(workflow="big.ticked")):
                await asyncio.sleep(0.02)  # stored by the scheduler's loop, and fired
        [first] = await eng.list_runs(workflow="big.ticked")
        results = [await (await eng.get(first.run_id)).result(timeout=WAIT)]
        clock.advance(60)
        await eng.scheduler.run_due()
        runs = sorted(run.run_id for run in await eng.list_runs(workflow="big.ticked"))
        results.append(await (await eng.get(runs[-1])).result(timeout=WAIT))
    ticks = [datetime.fromtimestamp(start + s, UTC).isoformat() for s in (60, 120)]
    assert runs == [f"sched:big.ticked:{t.replace('+00:00', 'Z')}" for t in ticks]
    assert results == [10_000, 10_000]  # one run a tick: none lost, none doubled
    said = [r.getMessage() for r in caplog.records if r.name == "cairn.scheduler"]
    assert said[0].startswith("schedule 'big.ticked': not stored yet: cannot store arguments of ")
    assert said[0].endswith("; declared again until the blob store takes its arguments")
    assert "schedule 'big.ticked': stored, the blob store took its arguments" in said


async def test_blob_outage__a_pause_waits_for_a_step_result_the_store_has_not_taken(
    kit: Kit, tmp_path: Path
) -> None:
    # Parking now would drop the result in hand, and the step would run again after the
    # resume: the run parks at its next durable point, once the store takes the result.
    calls: list[str] = []

    @kit.step("big.pause_step")
    def produce() -> str:
        calls.append("produce")
        return "p" * 10_000

    @kit.step("big.pause_after")
    def after() -> str:
        calls.append("after")
        return "after"

    @kit.workflow("big.pause_outage")
    async def pause_outage() -> int:
        text = await produce()
        await after()
        return len(text)

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(pause_outage)
        await until_it_waits_for_the_store(eng, run.run_id)
        await run.pause()
        await asyncio.sleep(0.3)  # a few more tries: still waiting, not parked
        assert (await eng.control.record(run.run_id)).status == "RUNNING"
        where.unlink()
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "PAUSED":
                await asyncio.sleep(0.02)
        assert calls == ["produce"]  # parked at the next step, its result recorded
        await run.resume()
        assert await run.result(timeout=WAIT) == 10_000
    assert calls == ["produce", "after"]  # nothing ran twice
