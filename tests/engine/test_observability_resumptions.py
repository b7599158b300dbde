"""A run that goes on elsewhere (handed back, recovered) is started once in the metrics.

Each scenario ends a run's first attempt early in one engine and lets another engine
finish it, both reporting to one Metrics (a sum over processes, as a dashboard adds them
up): `cairn_runs_started_total` must say 1, whichever way the run changed hands, and the
claim that takes a run back up measures no claim lag (it was due long before).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import cairn
from cairn.codecs import Encrypted
from cairn.observability import Metrics
from cairn.store.programs import workers

from .kit import WAIT, Gate, Kit
from .seeds import until
from .test_observability_metrics import sample

KEY = b"\x01" * 32
HandOver = Callable[[Kit, Gate, Metrics, Any], Awaitable[str]]


def keyed(kit: Kit, **options: Any) -> Any:
    """An engine with the key of the runs' values."""
    return kit.engine(codec=Encrypted({"k1": KEY}, "k1"), **options)


async def stopped(kit: Kit, gate: Gate, metrics: Metrics, workflow: Any) -> str:
    """A clean stop cuts the first attempt off mid-step and hands the run back."""
    first = keyed(kit, metrics=metrics)
    await first.open()
    try:
        run_id = (await first.start(workflow, "a")).run_id
    finally:
        await gate.hold(first)
    return run_id


async def crashed(kit: Kit, gate: Gate, metrics: Metrics, workflow: Any) -> str:
    """The first attempt's process dies mid-step; its neighbour finds it dead."""
    first = keyed(kit, metrics=metrics)
    await first.open()
    try:
        run_id = (await first.start(workflow, "a")).run_id
        await until(first, run_id, "RUNNING")
        owner = (await first.control.record(run_id)).owner
        async with asyncio.timeout(WAIT):
            await gate.entered.wait()
    finally:
        await first._die()
    assert owner is not None
    await first.store.write(workers.expire_workers([owner]))
    await first.store.close()
    gate.opened = True
    return run_id


async def keyless(kit: Kit, gate: Gate, metrics: Metrics, workflow: Any) -> str:
    """A worker without the key begins the first attempt and hands the run back unread."""
    gate.opened = True
    async with keyed(kit, workers=0) as starter:
        run_id = (await starter.start(workflow, "a")).run_id
    async with kit.engine(metrics=metrics) as without_key:
        async with asyncio.timeout(WAIT):
            while True:
                record = await without_key.control.record(run_id)
                if record.status == "PENDING" and "k1" in (record.waiting_for or ""):
                    break
                await asyncio.sleep(0.005)
    return run_id


@pytest.mark.parametrize(
    ("hand_over", "lags"),
    [(stopped, 0), (crashed, 0), (keyless, 1)],
    ids=["stopped", "crashed", "keyless"],
)
async def test_metrics__a_run_that_changes_hands_is_started_once(
    kit: Kit, gate: Gate, hand_over: HandOver, lags: int
) -> None:
    @kit.step("resumed.gated")
    async def gated() -> str:
        return await gate()

    @kit.workflow("metrics.resumed")
    async def resumed(text: str) -> str:
        return f"{text}/{await gated()}"

    metrics = Metrics()
    run_id = await hand_over(kit, gate, metrics, resumed)
    async with keyed(kit, metrics=metrics) as second:
        assert await (await second.get(run_id)).result(timeout=WAIT) == "a/through"

    assert sample(metrics, "cairn_runs_started_total", workflow="metrics.resumed") == 1
    finished = "cairn_runs_finished_total"
    assert sample(metrics, finished, workflow="metrics.resumed", status="completed") == 1
    # Only a run's first claim is measured: taking it back up is no wait in the queue.
    assert sample(metrics, "cairn_claim_lag_seconds_count", queue="") == lags


async def test_metrics__a_fork_is_a_run_started_a_retry_is_not(kit: Kit) -> None:
    # A fork is a new run, however much of its journal it copied; a retry goes on with
    # the same run. Each run started is counted once, as each run finished is.
    broken = {"now": True}

    @kit.step("resumed.made")
    async def made() -> int:
        return 1

    @kit.step("resumed.shaky", retries=1)
    async def shaky() -> int:
        if broken["now"]:
            raise ValueError("not yet")
        return 2

    @kit.workflow("metrics.forked")
    async def forked() -> int:
        return await made() + await shaky()

    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        run = await engine.start(forked)
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)
        broken["now"] = False
        retried = await engine.retry(run.run_id)
        assert await retried.result(timeout=WAIT) == 3
        shaky_seq = next(
            h.seq for h in await engine.history(run.run_id) if h.name == "resumed.shaky"
        )
        fork = await engine.fork(run.run_id, from_step=shaky_seq)
        assert await fork.result(timeout=WAIT) == 3

    assert sample(metrics, "cairn_runs_started_total", workflow="metrics.forked") == 2
    finished = "cairn_runs_finished_total"
    assert sample(metrics, finished, workflow="metrics.forked", status="completed") == 2
