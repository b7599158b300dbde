"""A worker's liveness from the inside: heartbeats off the loop, the watchdog, the
reconciler, and one attempt per run."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest
from tests.engine.intercept import intercept
from tests.store.kit import execute

import cairn
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunRecord

from .kit import WAIT, Kit

LEASE = 0.9  # heartbeats every 0.3 s


async def _until(check: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _heartbeat(url: str, worker_id: str) -> float:
    rows = execute(url, "SELECT heartbeat_at FROM workers WHERE worker_id = ?", (worker_id,))
    return float(rows[0][0])


async def test_heartbeats__go_on_while_a_step_blocks_the_event_loop(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[float] = []

    @kit.step("live.blocker")
    async def blocker(worker_id: str) -> str:
        # Blocks the loop for three leases; meanwhile, look at the heartbeat from here.
        for _ in range(9):
            time.sleep(LEASE / 3)
            seen.append(_heartbeat(kit.url, worker_id))
        return "done"

    @kit.workflow("live.blocking")
    async def blocking(worker_id: str) -> str:
        return await blocker(worker_id)

    caplog.set_level(logging.WARNING, logger="cairn")
    async with kit.engine(lease=LEASE) as engine:
        assert engine.worker is not None
        run = await engine.start(blocking, engine.worker.env.owner)
        assert await run.result(timeout=WAIT) == "done"

    assert len(set(seen)) >= 4, seen  # it kept beating while the loop could not
    assert max(b - a for a, b in itertools.pairwise(seen)) < LEASE
    warnings = [r.getMessage() for r in caplog.records if "blocked" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per stall
    assert "step 'live.blocker#1'" in warnings[0]
    assert "live.blocking" in warnings[0]


async def test_reconciler__resumes_a_run_held_here_that_nothing_executes(kit: Kit) -> None:
    # What a lost reply to a start leaves: the run is stored RUNNING under this worker,
    # and no attempt of it executes here.
    calls: Counter[str] = Counter()

    @kit.step("live.once")
    async def once() -> str:
        calls["once"] += 1
        return "ok"

    @kit.workflow("live.lost")
    async def lost() -> str:
        return await once()

    async with kit.engine(lease=LEASE) as engine:
        assert engine.worker is not None
        now = time.time()
        orphan = RunRecord(
            run_id="held-idle",
            workflow="live.lost",
            status="RUNNING",
            args='{"args": [], "kwargs": {}}',
            created_at=now,
            updated_at=now,
            started_at=now,
            attempt=1,
            owner=engine.worker.env.owner,
            fence=1,
        )
        await engine.store.write(run_ops.create_run(orphan))
        result = await (await engine.get("held-idle")).result(timeout=WAIT)
        stored = await engine.control.record("held-idle")

    assert result == "ok"
    assert calls == {"once": 1}
    assert (stored.fence, stored.recoveries) == (1, 0)


async def test_reconciler__ends_an_attempt_whose_run_was_taken_over(kit: Kit) -> None:
    entered, ended = asyncio.Event(), asyncio.Event()

    @kit.step("live.hang")
    async def hang() -> str:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()
        return "never"

    @kit.workflow("live.taken")
    async def taken() -> str:
        return await hang()

    async with kit.engine(lease=LEASE) as engine:
        run = await engine.start(taken)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        # Another worker, alive, took the run over (it judged this one dead, say).
        execute(
            kit.url,
            "INSERT INTO workers (worker_id, host, pid, started_at, heartbeat_at, lease) "
            "VALUES ('elsewhere', 'other-host', 1, ?, ?, 3600)",
            (time.time(), time.time()),
        )
        execute(
            kit.url,
            "UPDATE runs SET owner = 'elsewhere', fence = fence + 1 WHERE run_id = ?",
            (run.run_id,),
        )
        async with asyncio.timeout(WAIT):
            await ended.wait()  # the attempt here was ended, not left running
        assert engine.worker is not None
        await _until(lambda: _idle(engine), "the attempt to end")
        stored = await engine.control.record(run.run_id)

    assert (stored.status, stored.owner, stored.fence) == ("RUNNING", "elsewhere", 2)
    assert await _journal(kit.url, run.run_id) == []


async def _idle(engine: cairn.Engine) -> bool:
    return engine.worker is not None and not engine.worker.active


async def _journal(url: str, run_id: str) -> list[Any]:
    return execute(url, "SELECT key FROM steps WHERE run_id = ?", (run_id,))


async def test_start__a_lost_reply_to_a_committed_start_is_resumed(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("live.step")
    async def step() -> str:
        calls["step"] += 1
        return "ok"

    @kit.workflow("live.lost-reply")
    async def flow() -> str:
        return await step()

    async with kit.engine(lease=LEASE) as engine:

        async def lossy(run: RunRecord) -> tuple[RunRecord, bool]:
            await real(run)
            raise cairn.StoreUnavailable("reply lost (simulated)", unknown=True)

        real, restore = intercept(engine.store, run_ops.create_run, lossy)
        with pytest.raises(cairn.StoreUnavailable):
            await engine.start(flow, run_id="lost-start")
        restore()
        result = await (await engine.get("lost-start")).result(timeout=WAIT)

    assert result == "ok"
    assert calls == {"step": 1}


async def test_start__sent_again_after_a_lost_reply_finds_its_own_run(kit: Kit) -> None:
    # The store sent the insert again and it found the row: that row is this start's own.
    @kit.workflow("live.again")
    async def again() -> str:
        return "ran"

    async with kit.engine(lease=LEASE) as engine:

        async def twice(run: RunRecord) -> tuple[RunRecord, bool]:
            await real(run)
            return await real(run)  # (stored, False): already there

        real, _ = intercept(engine.store, run_ops.create_run, twice)
        handle = await engine.start(again, run_id="sent-twice")
        assert await handle.result(timeout=WAIT) == "ran"


async def test_start__by_a_name_this_engine_does_not_import_is_queued(kit: Kit) -> None:
    @kit.workflow("live.elsewhere")
    async def elsewhere() -> str:
        return "ran there"

    async with kit.fresh().engine() as starter:  # a worker that does not import it
        handle = await starter.start("live.elsewhere", allow_unknown=True)
        await asyncio.sleep(0.2)
        assert await handle.status() == cairn.RunStatus.PENDING  # not FAILED
    async with kit.engine() as worker:
        assert await (await worker.get(handle.run_id)).result(timeout=WAIT) == "ran there"


async def test_claim__a_run_back_here_under_a_new_fence_waits_for_its_old_attempt(
    kit: Kit,
) -> None:
    # This worker's attempt of a run is still inside a sync step (a thread cannot be
    # stopped) when the run comes back to it under a new fence: the new attempt starts
    # only once the old one's thread has returned, and the old one commits nothing.
    inside, release = threading.Event(), threading.Event()
    running = Counter[str]()
    overlaps: list[str] = []
    lock = threading.Lock()

    @kit.step("live.slow")
    def slow() -> str:
        with lock:
            running["slow"] += 1
            if running["slow"] > 1:
                overlaps.append("two at once")
        inside.set()
        release.wait(WAIT)
        with lock:
            running["slow"] -= 1
        return "slow"

    @kit.workflow("live.twice")
    async def twice() -> str:
        return await slow()

    async with kit.engine(lease=30) as engine:
        assert engine.worker is not None
        run = await engine.start(twice)
        await asyncio.to_thread(inside.wait, WAIT)
        inside.clear()
        record = await engine.control.record(run.run_id)
        # The run is claimed again by this same worker (after a takeover and a park, say).
        execute(kit.url, "UPDATE runs SET fence = fence + 1 WHERE run_id = ?", (run.run_id,))
        record.fence += 1
        engine.worker.executions.start(record, fresh=False, epoch=engine.worker.tenure.epoch)
        await asyncio.sleep(0.3)
        assert not inside.is_set()  # the new attempt waits for the old thread
        release.set()
        assert await run.result(timeout=WAIT) == "slow"

        history = await engine.history(run.run_id)

    assert overlaps == []  # one after the other, never two at once
    assert [(entry.key, entry.result) for entry in history] == [("live.slow#1", "slow")]


async def test_claim__a_worker_whose_own_heartbeat_is_overdue_judges_no_heartbeats(
    kit: Kit,
) -> None:
    # Its own beats not landing, a worker cannot tell a dead neighbour from one whose
    # beats the same stall holds up (a hung database, a network partition of both): it
    # takes runs of dead workers only (no row, expired), none for an old heartbeat.
    @kit.workflow("live.orphan")
    async def orphan() -> str:
        return "recovered"

    async with kit.engine(lease=LEASE) as engine:
        worker = engine.worker
        assert worker is not None and worker._heartbeat is not None
        await asyncio.sleep(LEASE * 1.2)  # a whole quiet lease: it may judge heartbeats
        assert worker.judges_heartbeats()
        worker._heartbeat.cease()  # its beats stop landing (as behind a hung connection)
        await _until(_async(lambda: not worker.tenure.fresh()), "its trust to lapse")
        execute(
            kit.url,
            "INSERT INTO workers (worker_id, host, pid, started_at, heartbeat_at, lease) "
            "VALUES ('silent', 'other-host', 1, ?, ?, 1)",
            (time.time() - 60, time.time() - 60),
        )
        execute(
            kit.url,
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, "
            "attempt, owner, fence) VALUES ('of-silent', 'live.orphan', 'RUNNING', "
            "'{\"args\": [], \"kwargs\": {}}', ?, ?, 1, 'silent', 1)",
            (time.time(), time.time()),
        )
        worker.executions.wake()
        await asyncio.sleep(LEASE)  # claims meanwhile: none may take it
        stored = await engine.control.record("of-silent")
        judging = worker.judges_heartbeats()

    assert (stored.owner, stored.fence, stored.recoveries) == ("silent", 1, 0)
    assert not judging


def _async(check: Any) -> Any:
    async def check_now() -> bool:
        return bool(check())

    return check_now


async def test_cancel__met_by_a_step_that_waited_for_its_worker_s_heartbeat(kit: Kit) -> None:
    # After a gap (the database away, the process frozen) a step may start only once a
    # heartbeat has committed. A cancel another process makes meanwhile, which the worker
    # learns while the step waits, is met at the step's durable point: the step does not
    # start (it did, once the heartbeat landed: seen in a soak, tests/chaos/test_mass_cancel).
    started: list[str] = []

    @kit.step("live.before_gap")
    async def before_gap() -> None:
        started.append("before_gap")
        tenure = engine.worker.tenure  # type: ignore[union-attr]
        tenure.renewed = lambda sent_at: None  # type: ignore[method-assign]  # beats held up
        tenure.state = (0.0, tenure.epoch)  # its trust lapses, as after an outage

    @kit.step("live.after_gap")
    async def after_gap() -> None:
        started.append("after_gap")

    @kit.workflow("live.gap")
    async def gap() -> None:
        await before_gap()
        await after_gap()

    async with kit.engine(lease=LEASE) as engine:
        worker = engine.worker
        assert worker is not None
        tenure = worker.tenure
        waiting = asyncio.Event()
        renewal = tenure.renewal

        async def renewal_seen(timeout: float) -> None:
            waiting.set()
            await renewal(timeout)

        tenure.renewal = renewal_seen  # type: ignore[method-assign]
        run = await engine.start(gap)
        await asyncio.wait_for(waiting.wait(), WAIT)  # the next step waits for a heartbeat
        with cairn.Client(kit.url, registry=kit.registry) as client:
            await asyncio.to_thread(client.cancel, run.run_id)  # as `cairn runs cancel` does
        live = worker.executions.live
        await _until(_async(lambda: live[run.run_id].interrupts.cancel), "the worker to learn")
        del tenure.renewed  # heartbeats land again
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert started == ["before_gap"]
    assert [(entry.kind, entry.key) for entry in history][-1][0] == "cancel"
    assert history[-1].result["at"] == "live.after_gap#1"
