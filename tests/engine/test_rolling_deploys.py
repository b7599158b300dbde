"""A rolling deploy: workers of two versions of a workflow on one database.

A worker whose code cannot replay a run started under another version hands it back
for a live worker of that version instead of failing it; with no such worker, or for a
run of its own version, the run fails.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.clock import VirtualClock
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord

from .kit import WAIT, Kit


async def live_worker(
    engine: cairn.Engine, workflow: str, version: str, *, lease: float = 60.0
) -> None:
    """A live worker row of `version` of `workflow` that claims nothing (another process).

    It never beats again: it is live for `lease` seconds, then as dead as one killed.
    """
    worker = WorkerRecord(
        f"elsewhere-{version}",
        "elsewhere",
        1,
        0.0,
        0.0,
        workflows=json.dumps([workflow]),
        versions=json.dumps({workflow: version}),
        lease=lease,
    )
    await engine.store.write(worker_ops.register_worker(worker))


def order_v(kit: Kit, version: str | None, calls: Counter[str], *, second: str) -> Any:
    """Reserve, then `second` (charge in v1, bill in v2), wait for "go", ship."""

    async def body(name: str) -> str:
        calls[name] += 1
        return name

    steps = {name: kit.step(name)(lambda name=name: body(name)) for name in ("reserve", second)}

    @kit.workflow("roll.order", version=version)
    async def order() -> list[str]:
        done = [await steps["reserve"](), await steps[second]()]
        await cairn.wait_for_event("go")
        return done

    return order


async def status_of(engine: cairn.Engine, run_id: str, want: str) -> Any:
    async with asyncio.timeout(WAIT):
        while (record := await engine.control.record(run_id)).status != want:
            await asyncio.sleep(0.01)
    return record


async def test_rolling_deploy__a_worker_that_cannot_replay_another_versions_run_hands_it_back(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    old = kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    new = kit.fresh()
    order_v(new, "v2", calls, second="bill")
    async with new.engine() as engine:
        await live_worker(engine, "roll.order", "v1")
        await engine.send_event(run.run_id, "go", None)
        # Claimed, replayed, handed back: not failed, and it says what it waits for.
        async with asyncio.timeout(WAIT):
            while "version 'v1'" not in (
                (record := await engine.control.record(run.run_id)).waiting_for or ""
            ):
                assert record.status != "FAILED", record.error
                await asyncio.sleep(0.01)
        # Parked again, due, as the claim found it when it woke; its attempt kept.
        assert (record.status, record.attempt) == ("WAITING", 1)
        assert record.waiting_for == (
            "a worker running version 'v1' of workflow 'roll.order' (handed back by a "
            "worker running version 'v2', which cannot replay it: workflow code diverged from its "
            "history: it started step 'bill#1', but the history records step 'charge#1' "
            "(history seq 2) that replay never reached)"
        )
    # The worker that handed it back is gone: what operators read names no "this worker"
    # (before: "(this worker runs version 'v2', ...)", about a worker no longer there).
    async with new.engine(workers=0) as reader:
        [shown] = [r for r in await reader.list_runs() if r.run_id == run.run_id]
        assert shown.waiting_for == record.waiting_for
    async with old.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == ["reserve", "charge"]
    assert calls == {"reserve": 1, "charge": 1}


async def test_rolling_deploy__with_no_live_worker_of_its_version_the_run_fails_naming_both(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    old = kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    new = kit.fresh()
    order_v(new, "v2", calls, second="bill")
    async with new.engine() as engine:
        await live_worker(engine, "roll.order", "v3")  # alive, but of another version
        await engine.send_event(run.run_id, "go", None)
        with pytest.raises(cairn.RunFailed) as failed:
            await (await engine.get(run.run_id)).result(timeout=WAIT)
    assert failed.value.error_message == (
        "run of version 'v1' of workflow 'roll.order', which no live worker runs, and code "
        "of version 'v2' cannot replay it: workflow code diverged from its history: it "
        "started step 'bill#1', but the history records step 'charge#1' (history seq 2) "
        "that replay never reached"
    )


async def test_rolling_deploy__a_run_of_the_same_version_that_diverges_still_fails(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    old = kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    new = kit.fresh()
    order_v(new, "v1", calls, second="bill")  # changed without a new version
    async with new.engine() as engine:
        await engine.send_event(run.run_id, "go", None)
        with pytest.raises(cairn.RunFailed, match="started step 'bill#1'"):
            await (await engine.get(run.run_id)).result(timeout=WAIT)


async def test_version__a_run_queued_by_older_code_takes_the_version_of_the_code_that_runs_it(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    old = kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    new = kit.fresh()
    order_v(new, "v2", calls, second="bill")
    async with old.engine(workers=0) as starter:  # a web app still on v1 queues it
        handle = await starter.start(v1)
        assert (await handle.describe()).version == "v1"
    async with new.engine() as engine:  # a v2 worker executes it first: its history is v2's
        record = await status_of(engine, handle.run_id, "WAITING")
        assert record.version == "v2"
    async with old.engine() as engine:  # so a v1 worker hands it back rather than fail it
        await live_worker(engine, "roll.order", "v2")
        await engine.send_event(handle.run_id, "go", None)
        async with asyncio.timeout(WAIT):
            while "version 'v2'" not in (
                (record := await engine.control.record(handle.run_id)).waiting_for or ""
            ):
                assert record.status != "FAILED", record.error
                await asyncio.sleep(0.01)
    async with new.engine() as engine:
        assert await (await engine.get(handle.run_id)).result(timeout=WAIT) == ["reserve", "bill"]
    assert calls == {"reserve": 1, "bill": 1}


async def test_cancel__a_handed_back_run_with_history_runs_its_cleanup(kit: Kit) -> None:
    # Handed back having written nothing, the woken run keeps its attempt (1) and parks
    # again; it has history: a cancel must reach its code, not end it as a run never
    # started.
    calls: Counter[str] = Counter()
    old = kit.fresh()

    @old.step("cleanup")
    async def cleanup() -> None:
        calls["cleanup"] += 1

    @old.workflow("roll.hold", version="v1")
    async def hold() -> None:
        try:
            await cairn.wait_for_event("go")
        finally:
            await cleanup()

    new = kit.fresh()

    @new.workflow("roll.hold", version="v2")
    async def hold_v2() -> None:
        await cairn.sleep("1s")  # a wait added before the park point: cannot replay v1's
        await cairn.wait_for_event("go")

    async with old.engine() as engine:
        run = await engine.start(hold)
        await status_of(engine, run.run_id, "WAITING")
    async with new.engine() as engine:
        await live_worker(engine, "roll.hold", "v1")
        await engine.send_event(run.run_id, "go", None)
        async with asyncio.timeout(WAIT):
            while "version 'v1'" not in (
                (await engine.control.record(run.run_id)).waiting_for or ""
            ):
                await asyncio.sleep(0.01)
        await engine.cancel(run.run_id)
        record = await engine.control.record(run.run_id)
        assert (record.status, record.attempt, record.control) == ("WAITING", 1, "cancel")
    async with old.engine() as engine:
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get(run.run_id)).result(timeout=WAIT)
    assert calls == {"cleanup": 1}


def sync_order_v(kit: Kit, version: str, calls: Counter[str], *, second: str) -> Any:
    """order_v as a sync workflow with sync steps."""

    def body(name: str) -> str:
        calls[name] += 1
        return name

    steps = {name: kit.step(name)(lambda name=name: body(name)) for name in ("reserve", second)}

    @kit.workflow("roll.sync", version=version)
    def order() -> list[str]:
        done = [steps["reserve"](), steps[second]()]
        cairn.wait_for_event("go")
        return done

    return order


async def test_rolling_deploy__a_sync_workflow_is_handed_back_too(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    old, new = kit.fresh(), kit.fresh()
    v1 = sync_order_v(old, "v1", calls, second="charge")
    sync_order_v(new, "v2", calls, second="bill")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    async with new.engine() as engine:
        await live_worker(engine, "roll.sync", "v1")
        await engine.send_event(run.run_id, "go", None)
        async with asyncio.timeout(WAIT):
            while "version 'v1'" not in (
                (record := await engine.control.record(run.run_id)).waiting_for or ""
            ):
                assert record.status != "FAILED", record.error
                await asyncio.sleep(0.01)
    async with old.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == ["reserve", "charge"]
    assert calls == {"reserve": 1, "charge": 1}


async def test_rolling_deploy__a_woken_run_resumed_after_a_lost_claim_reply_is_handed_back_alike(
    kit: Kit,
) -> None:
    # The claim that woke the run committed, but its reply never reached the worker (a
    # connection lost after COMMIT): the reconciler resumes the run it finds held here.
    # Before: that path did not know the claim had woken the run, so the hand-back took
    # back an attempt the wake never counted and queued the run PENDING ("attempt 0"),
    # and its next claim counted a start its queue's rate had counted already.
    calls: Counter[str] = Counter()
    old, new = kit.fresh(), kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    order_v(new, "v2", calls, second="bill")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    [(started,)] = execute(
        kit.url,
        "SELECT COALESCE(counted_start_at, started_at) FROM runs WHERE run_id = ?",
        (run.run_id,),
    )
    async with new.engine(lease=0.9, polls=False) as engine:
        assert engine.worker is not None
        await live_worker(engine, "roll.order", "v1")
        await engine.send_event(run.run_id, "go", None)
        owner = engine.worker.env.owner
        claim = claim_ops.claim(owner, 1, now=time.time(), stale=False, only=[run.run_id])
        assert [r.run_id for r in (await engine.store.write(claim)).runs] == [run.run_id]
        async with asyncio.timeout(WAIT):
            while (
                "version 'v1'"
                not in ((record := await engine.control.record(run.run_id)).waiting_for or "")
                or record.owner is not None
            ):
                assert record.status != "FAILED", record.error
                await asyncio.sleep(0.01)
        assert (record.status, record.attempt, record.recoveries) == ("WAITING", 1, 0)
    async with old.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == ["reserve", "charge"]
        record = await engine.control.record(run.run_id)
    assert (record.attempt, record.recoveries) == (1, 0)
    [(counted,)] = execute(
        kit.url,
        "SELECT COALESCE(counted_start_at, started_at) FROM runs WHERE run_id = ?",
        (run.run_id,),
    )
    assert counted == started  # started once: its queue's rate counts it once
    assert calls == {"reserve": 1, "charge": 1}


async def test_rolling_deploy__a_run_handed_back_for_a_worker_that_died_fails_without_waiting(
    kit: Kit,
) -> None:
    # The worker of v1 the run was handed back for is killed (it never beats again) and
    # its lease runs out. Before: the run still said it waited for a worker running v1
    # until the hand-back's back-off ended (2 s, doubling to 5 minutes; here the worker's
    # clock stands still, so for ever); the next claim would fail it. Now the worker
    # that handed it back sees no live worker of v1 at a heartbeat and fails it then.
    calls: Counter[str] = Counter()
    old, new = kit.fresh(), kit.fresh()
    v1 = order_v(old, "v1", calls, second="charge")
    order_v(new, "v2", calls, second="bill")
    async with old.engine() as engine:
        run = await engine.start(v1)
        await status_of(engine, run.run_id, "WAITING")
    async with new.engine(clock=VirtualClock(), lease=0.9) as engine:
        await live_worker(engine, "roll.order", "v1", lease=1.0)
        await engine.send_event(run.run_id, "go", None)
        async with asyncio.timeout(WAIT):
            while "version 'v1'" not in (
                (await engine.control.record(run.run_id)).waiting_for or ""
            ):
                await asyncio.sleep(0.01)
        with pytest.raises(cairn.RunFailed) as failed:
            await (await engine.get(run.run_id)).result(timeout=WAIT)
    assert failed.value.error_message.startswith(
        "run of version 'v1' of workflow 'roll.order', which no live worker runs, and code "
        "of version 'v2' cannot replay it"
    )
    assert calls == {"reserve": 1, "charge": 1}
