"""A blob store that does not take a step's result while the worker stops or the run is
cancelled inside `cairn.shield()`, on both stores.

The step has returned: its result is in hand. A stop's grace, and a shield, are meant to
let such work finish, so the wait for the store goes on through them (the step is not
run again once the store takes the value); only a stop's end cuts it off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import cairn

from .kit import WAIT, Kit
from .test_blob_outages import until_it_waits_for_the_store, unwritable_store
from .test_large_values import engine


async def test_blob_outage__a_stop_waits_for_the_store_within_its_grace(
    kit: Kit, tmp_path: Path
) -> None:
    # Before: the stop unwound the wait at once and handed the run back without the
    # result, so the next worker ran the step again (and the log said none was cut off).
    calls: list[int] = []

    @kit.step("big.stop_step")
    def produce() -> str:
        calls.append(1)
        return "s" * 10_000

    @kit.workflow("big.stop_outage")
    async def stop_outage() -> int:
        return len(await produce())

    where = unwritable_store(kit, tmp_path)
    eng = engine(kit, tmp_path, inline_limit="1KiB", grace=WAIT * 3, lease=60)
    await eng.open()
    run = await eng.start(stop_outage)
    await until_it_waits_for_the_store(eng, run.run_id)
    closing = asyncio.ensure_future(eng.close())
    await asyncio.sleep(0.3)
    assert not closing.done()  # within its grace, still waiting for the store
    where.unlink()  # the store takes blobs again
    async with asyncio.timeout(WAIT):
        await closing
    async with engine(kit, tmp_path, inline_limit="1KiB") as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == 10_000
    assert calls == [1]


async def test_blob_outage__a_stop_cuts_the_wait_off_at_the_end_of_its_grace(
    kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    @kit.step("big.cut_step")
    def produce() -> str:
        calls.append(1)
        return "k" * 10_000

    @kit.workflow("big.cut_outage")
    async def cut_outage() -> int:
        return len(await produce())

    where = unwritable_store(kit, tmp_path)
    eng = engine(kit, tmp_path, inline_limit="1KiB", grace=0.3, lease=60)
    await eng.open()
    run = await eng.start(cut_outage)
    await until_it_waits_for_the_store(eng, run.run_id)
    async with asyncio.timeout(WAIT):
        await eng.close()
    assert "cut off by the end of the grace" in caplog.text
    where.unlink()
    async with engine(kit, tmp_path, inline_limit="1KiB") as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == 10_000
    assert calls == [1, 1]  # cut off: it ran again, as the log said


async def test_blob_outage__a_cancel_inside_a_shield_waits_for_the_store(
    kit: Kit, tmp_path: Path
) -> None:
    # Before: the cancel unwound the shielded step's wait for the store; the replay met
    # no cancel inside the shield and ran the step again.
    calls: list[int] = []

    @kit.step("big.shielded_step")
    def produce() -> str:
        calls.append(1)
        return "h" * 10_000

    @kit.workflow("big.shielded_outage")
    async def shielded_outage() -> int:
        with cairn.shield():
            size = len(await produce())
        await cairn.sleep("1h")  # the cancel is met here
        return size

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(shielded_outage)
        await until_it_waits_for_the_store(eng, run.run_id)
        await run.cancel()
        await asyncio.sleep(0.3)
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # still waiting
        where.unlink()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    assert calls == [1]


async def test_blob_outage__a_shield_in_a_sync_steps_thread_holds_a_cancel_off_its_write(
    kit: Kit, tmp_path: Path
) -> None:
    # The wait for the store runs on the event loop, in the context of the thread's call
    # (run_coroutine_threadsafe copies it), so it sees the thread's shield.
    calls: list[str] = []

    @kit.step("big.shielded_writer")
    def writer() -> str:
        calls.append("step")
        with cairn.shield():
            cairn.stream("tokens").write_sync("w" * 10_000)
        calls.append("written")
        return "done"

    @kit.workflow("big.shielded_writes")
    async def shielded_writes() -> str:
        done = await writer()
        await cairn.sleep("1h")  # the cancel is met here
        return done

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(shielded_writes)
        await until_it_waits_for_the_store(eng, run.run_id)
        await run.cancel()
        await asyncio.sleep(0.3)
        assert calls == ["step"]  # still waiting
        where.unlink()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)  # met after the step
    assert calls == ["step", "written"]


async def test_blob_outage__a_cancel_inside_a_shield_waits_for_a_childs_arguments(
    kit: Kit, tmp_path: Path
) -> None:
    # Before: the cancel ended the wait for the store to take the child's arguments; the
    # replay met no cancel inside the shield, came back to the same wait, and ended it
    # again, and again.
    started: list[int] = []

    @kit.workflow("big.shielded_child")
    async def measured(data: str) -> int:
        started.append(1)
        return len(data)

    @kit.workflow("big.shielded_start")
    async def shielded_start() -> int:
        with cairn.shield():
            size = await measured("m" * 10_000)
        await cairn.sleep("1h")  # the cancel is met here
        return size

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(shielded_start)
        await until_it_waits_for_the_store(eng, run.run_id)
        first = (await eng.control.record(run.run_id)).attempt
        await run.cancel()
        await asyncio.sleep(0.3)
        record = await eng.control.record(run.run_id)
        assert (record.status, record.attempt) == ("RUNNING", first)  # the same attempt
        assert "blob store" in (record.waiting_for or "")
        where.unlink()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    assert started == [1]


async def test_blob_outage__a_cleanup_step_after_a_cancel_waits_for_the_store(
    kit: Kit, tmp_path: Path
) -> None:
    # Before: the cancel, delivered already, ended the cleanup step's wait; the replay
    # delivered it again at the sleep and ran the cleanup step again, and again.
    calls: list[int] = []

    @kit.step("big.cleanup_step")
    def undo() -> str:
        calls.append(1)
        return "u" * 10_000

    @kit.workflow("big.cleanup_outage")
    async def cleanup_outage() -> None:
        try:
            await cairn.sleep("1h")
        except cairn.Cancelled:
            await undo()
            raise

    where = unwritable_store(kit, tmp_path)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(cleanup_outage)
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "SLEEPING":
                await asyncio.sleep(0.02)
        await run.cancel()
        async with asyncio.timeout(WAIT):
            while "blob store" not in ((await eng.control.record(run.run_id)).waiting_for or ""):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        assert calls == [1]
        where.unlink()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    assert calls == [1]
