"""Recovery at engine start: runs left RUNNING by dead workers, and max_recoveries.

A dead worker is written through the Store API, exactly as a killed process leaves it: a
worker row (a process in this PID namespace that no longer exists, or a heartbeat older
than its lease) and a RUNNING run it holds, with whatever of its journal was committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from tests.engine.intercept import intercept
from tests.store.kit import age_heartbeat

import cairn
from cairn import serialization
from cairn.runtime import leases
from cairn.store import Store, open_store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import AttemptRecord, Lease, RunRecord, StepRecord, WorkerRecord

from .kit import WAIT, Kit

JSON = serialization.get("json")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def _leave_orphan(
    url: str,
    workflow: str,
    *,
    dead: str = "pid",
    recoveries: int = 0,
    max_recoveries: int = 8,
    steps: tuple[tuple[str, Any], ...] = (),
    attempts: tuple[AttemptRecord, ...] = (),
    args: tuple[Any, ...] = (),
    run_id: str = "orphan-1",
) -> str:
    """Write what a worker killed mid-run leaves behind; returns the dead worker's id."""
    now = time.time()
    me = leases.this_process()
    assert me is not None
    process: str | None
    if dead == "pid":  # died a moment ago, in this PID namespace
        pid, host = _dead_pid(), leases.HOST
        process = str(leases.Process(me.boot_id, me.pid_ns, pid, 12345))
    elif dead == "heartbeat":  # silent for an hour, somewhere else
        pid, host, process = 1, "elsewhere.example", None
    else:  # alive: this very process
        pid, host, process = os.getpid(), leases.HOST, str(me)
    worker_id = f"{host}:{pid}:{dead}"
    store: Store = open_store(url)
    await store.open()
    try:
        await store.write(
            worker_ops.register_worker(
                WorkerRecord(worker_id, host, pid, 0.0, 0.0, 4, process=process)
            )
        )
        if dead == "heartbeat":
            age_heartbeat(url, worker_id, 3600)
        run = RunRecord(
            run_id=run_id,
            workflow=workflow,
            status="RUNNING",
            args=JSON.dumps({"args": list(args), "kwargs": {}}, what="args"),
            created_at=now - 5,
            updated_at=now - 1,
            started_at=now - 5,
            attempt=1 + recoveries,
            recoveries=recoveries,
            max_recoveries=max_recoveries,
            owner=worker_id,
            fence=1,
        )
        assert (await store.write(run_ops.create_run(run)))[1]
        for seq, (key, result) in enumerate(steps, start=1):
            name = key.split("#")[0]
            text = JSON.dumps(result, what=key)
            step = StepRecord(run_id, seq, key, "step", name, "completed", 1, now, now, text)
            await store.write(journal_ops.record_step(Lease(worker_id, 1), step))
        for attempt in attempts:
            await store.write(journal_ops.record_attempt(Lease(worker_id, 1), attempt))
    finally:
        await store.close()
    return worker_id


async def _stored(url: str, run_id: str) -> RunRecord:
    store: Store = open_store(url)
    await store.open()
    try:
        run = await store.read(run_ops.get_run(run_id))
    finally:
        await store.close()
    assert run is not None
    return run


def _declare(kit: Kit, calls: Counter[str], *, max_recoveries: int = 8) -> None:
    @kit.step("reserve")
    def reserve(item: str) -> str:
        calls["reserve"] += 1
        return f"reserved {item}"

    @kit.step("charge")
    async def charge(amount: int) -> str:
        calls["charge"] += 1
        return f"charged {amount}"

    @kit.workflow("recovery.order", max_recoveries=max_recoveries)
    async def order(item: str, amount: int) -> list[Any]:
        calls["workflow"] += 1
        return [await reserve(item), await charge(amount), cairn.current_run().attempt]


@pytest.mark.parametrize("dead", ["pid", "heartbeat"])
async def test_recovery__run_of_a_dead_worker_is_recovered_at_engine_start(
    kit: Kit, dead: str
) -> None:
    calls: Counter[str] = Counter()
    _declare(kit, calls)
    worker_id = await _leave_orphan(
        kit.url,
        "recovery.order",
        dead=dead,
        args=("sku-1", 30),
        steps=(("reserve#1", "reserved sku-1 earlier"),),
    )
    started = time.monotonic()
    # A dead process in this PID namespace is recovered at once, however long the lease.
    # A silent worker elsewhere is judged by its heartbeat, and only once this engine has
    # itself seen the database answer for a whole lease (after an outage every heartbeat
    # looks old): here a 1 s lease.
    lease = "10s" if dead == "pid" else "1s"
    async with kit.engine(lease=lease) as engine:
        result = await (await engine.get("orphan-1")).result(timeout=WAIT)
        elapsed = time.monotonic() - started
        workers = {w.worker_id: w for w in await engine.store.read(worker_ops.list_workers())}
    assert result == ["reserved sku-1 earlier", "charged 30", 2]
    assert calls == {"workflow": 1, "charge": 1}  # reserve#1 was replayed, not re-run
    if dead == "pid":
        assert elapsed < engine.lease / 2
    else:
        assert engine.lease <= elapsed < engine.lease + 2
    run = await _stored(kit.url, "orphan-1")
    assert (run.status, run.attempt, run.recoveries, run.owner) == ("COMPLETED", 2, 1, None)
    if dead == "pid":  # a dead local process is declared dead at once
        assert workers[worker_id].heartbeat_at == 0


async def test_recovery__run_of_a_live_worker_is_left_alone(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    _declare(kit, calls)
    await _leave_orphan(kit.url, "recovery.order", dead="alive", args=("sku-2", 5))
    async with kit.engine() as engine:
        assert engine.worker is not None
        assert await engine.worker.claim_once() == 0
        assert await (await engine.get("orphan-1")).status() == cairn.RunStatus.RUNNING
    assert calls == {}


async def test_recovery__pending_run_is_executed_by_the_next_engine(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    _declare(kit, calls)
    async with kit.engine(workers=0) as queuer:
        run = await queuer.start("recovery.order", "sku-3", 7)
    async with kit.engine() as engine:
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == [
            "reserved sku-3",
            "charged 7",
            1,
        ]


@pytest.mark.parametrize(("recoveries", "max_recoveries"), [(2, 2), (0, 0)])
async def test_recovery__past_max_recoveries_ends_the_run_with_poison_run(
    kit: Kit, recoveries: int, max_recoveries: int
) -> None:
    calls: Counter[str] = Counter()
    _declare(kit, calls, max_recoveries=max_recoveries)
    await _leave_orphan(
        kit.url,
        "recovery.order",
        recoveries=recoveries,
        max_recoveries=max_recoveries,
        args=("sku-4", 1),
    )
    async with kit.engine() as engine:
        handle = await engine.get("orphan-1")
        with pytest.raises(cairn.PoisonRun) as info:
            await handle.result(timeout=WAIT)
        assert await handle.status() == cairn.RunStatus.FAILED
        [summary] = await engine.list_runs(status="FAILED")
    assert calls == {}  # given up without executing it again
    assert isinstance(info.value, cairn.RunFailed)
    assert info.value.run_id == "orphan-1" and "'orphan-1'" in str(info.value)
    assert "max_recoveries" in str(info.value)
    assert summary.error is not None and summary.error["type"] == "cairn.errors.PoisonRun"


async def test_recovery__a_poisoned_run_counts_as_failed_in_the_metrics(kit: Kit) -> None:
    pytest.importorskip("prometheus_client")
    from cairn.observability import Metrics

    _declare(kit, Counter(), max_recoveries=1)
    await _leave_orphan(kit.url, "recovery.order", recoveries=1, max_recoveries=1)
    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        with pytest.raises(cairn.PoisonRun):
            await (await engine.get("orphan-1")).result(timeout=WAIT)
    labels = {"workflow": "recovery.order", "status": "failed"}
    assert metrics.registry.get_sample_value("cairn_runs_finished_total", labels) == 1


async def test_recovery__below_max_recoveries_is_recovered(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    _declare(kit, calls, max_recoveries=2)
    await _leave_orphan(
        kit.url, "recovery.order", recoveries=1, max_recoveries=2, args=("sku-5", 2)
    )
    async with kit.engine() as engine:
        result = await (await engine.get("orphan-1")).result(timeout=WAIT)
    assert result == ["reserved sku-5", "charged 2", 3]
    assert (await _stored(kit.url, "orphan-1")).recoveries == 2


async def test_recovery__during_backoff_waits_only_what_is_left(kit: Kit) -> None:
    calls: list[float] = []

    @kit.step("flaky", retries=cairn.Retry(max_attempts=3, delay="1h", max_delay="1h"))
    def flaky() -> str:
        calls.append(time.time())
        return "recovered"

    @kit.workflow("recovery.backoff")
    async def backoff() -> str:
        return str(await flaky())

    now = time.time()
    retry_at = now + 0.2  # the dead worker's first attempt failed; the retry is due soon
    failed = AttemptRecord(
        "orphan-1", "flaky#1", 1, "builtins.OSError", "reset", "tb", now, retry_at
    )
    await _leave_orphan(kit.url, "recovery.backoff", attempts=(failed,))
    async with kit.engine() as engine:
        assert await (await engine.get("orphan-1")).result(timeout=WAIT) == "recovered"
        [entry] = await engine.history("orphan-1")
        [attempt] = await engine.control.attempts("orphan-1")
    assert len(calls) == 1
    assert retry_at <= calls[0] < retry_at + 1.0  # neither early nor a fresh hour-long wait
    assert (entry.key, entry.attempts) == ("flaky#1", 2)
    assert attempt["message"] == "reset"


async def test_store_failure_mid_run__the_worker_hands_the_run_back_and_it_completes(
    kit: Kit,
) -> None:
    # A store failure that is neither "unavailable" nor "refused" ends the attempt, not the
    # run: the living worker hands the run back, and it is recovered on replay.
    calls: Counter[str] = Counter()

    @kit.step("rec.outage.a")
    async def a() -> str:
        calls["a"] += 1
        return "a"

    @kit.step("rec.outage.b")
    async def b() -> str:
        calls["b"] += 1
        return "b"

    @kit.workflow("rec.outage")
    async def flow() -> str:
        return await a() + await b()

    async with kit.engine() as engine:
        store = engine.store
        failed: list[str] = []

        async def flaky(lease: Lease, step: StepRecord) -> None:
            if step.name == "rec.outage.b" and not failed:
                failed.append(step.key)
                raise cairn.StoreError("database test: schema broken (simulated)")
            await record_step(lease, step)

        record_step, _ = intercept(store, journal_ops.record_step, flaky, plain=True)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "ab"
        assert await run.status() is cairn.RunStatus.COMPLETED

    assert failed == ["rec.outage.b#1"]
    assert calls == {"a": 1, "b": 2}  # b's first outcome never reached the journal
