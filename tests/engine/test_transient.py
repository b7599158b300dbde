"""Transient workflows (`durable=False`): run here, in memory; refused where durability counts."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import cairn
from cairn.store.programs import journal, runs
from cairn.store.programs import workers as worker_ops
from cairn.store.records import RunQuery
from cairn.testing import TestEngine

from .kit import WAIT, Kit

TRANSIENT = "is transient (durable=False)"


def _flaky_flow(kit: Kit, name: str = "quick") -> tuple[Any, list[int]]:
    """A transient workflow whose step fails twice, then sleeps 20ms; the attempts made."""
    attempts: list[int] = []

    @kit.step("charge", retries=cairn.Retry(max_attempts=3, delay="10ms", jitter=0))
    async def charge(amount: int) -> int:
        attempts.append(amount)
        if len(attempts) < 3:
            raise RuntimeError("gateway busy")
        return amount * 2

    @kit.workflow(name, durable=False)
    async def quick(amount: int) -> dict[str, Any]:
        charged = await charge(amount)
        await cairn.sleep("20ms")
        return {"charged": charged, "run": cairn.current_run().run_id}

    return quick, attempts


async def _no_trace_of(engine: cairn.Engine, run_id: str) -> None:
    """The engine's database holds nothing of run `run_id`."""
    with pytest.raises(cairn.RunNotFound):
        await engine.get(run_id)
    assert list(await engine.list_runs()) == []
    assert await engine.store.read(runs.list_runs(RunQuery(limit=100))) == []
    assert await engine.store.read(journal.load_journal(run_id)) == []
    assert await engine.store.read(journal.load_attempts(run_id)) == []


async def test_transient__retries_and_sleeps_in_memory_and_stores_nothing(kit: Kit) -> None:
    quick, attempts = _flaky_flow(kit)
    async with kit.engine() as engine:
        handle = await engine.start(quick, 21)
        result = await handle.result(timeout=WAIT)
        assert result == {"charged": 42, "run": handle.run_id}
        assert attempts == [21, 21, 21]
        assert await handle.status() == cairn.RunStatus.COMPLETED
        # The history lives on the private engine: the failed attempts and the sleep.
        private = engine.transient_runs.engine if engine.transient_runs else None
        assert private is not None
        history = await private.history(handle.run_id)
        assert [(e.kind, e.name, e.attempts) for e in history] == [
            ("step", "charge", 3),
            ("sleep", "sleep", 1),
        ]
        await _no_trace_of(engine, handle.run_id)
        # Workers say they execute durable workflows only.
        (worker,) = await engine.store.read(worker_ops.list_workers())
        assert "quick" not in json.loads(worker.workflows or "[]")


async def test_transient__start_by_name_and_run_id_reuse(kit: Kit) -> None:
    quick, _ = _flaky_flow(kit)
    async with kit.engine() as engine:
        first = await engine.start("quick", 1, run_id="t-1")
        again = await engine.start(quick, 99, run_id="t-1")
        assert again.run_id == first.run_id == "t-1"
        assert (await first.result(timeout=WAIT))["charged"] == 2
        await _no_trace_of(engine, "t-1")


async def test_transient__failure_raises_run_failed(kit: Kit) -> None:
    @kit.step("boom", retries=1)
    async def boom() -> None:
        raise ValueError("no stock")

    @kit.workflow("fails", durable=False)
    async def fails() -> None:
        await boom()

    async with kit.engine() as engine:
        handle = await engine.start(fails)
        with pytest.raises(cairn.RunFailed) as caught:
            await handle.result(timeout=WAIT)
        assert "no stock" in str(caught.value)
        await _no_trace_of(engine, handle.run_id)


async def test_transient__a_transient_parent_runs_its_children_in_memory(kit: Kit) -> None:
    @kit.workflow("leaf", durable=False)
    async def leaf(n: int) -> int:
        return n + 1

    @kit.workflow("tree", durable=False)
    async def tree(n: int) -> int:
        return await leaf(n) + await leaf(n * 10)

    async with kit.engine() as engine:
        handle = await engine.start(tree, 1)
        assert await handle.result(timeout=WAIT) == 13
        await _no_trace_of(engine, handle.run_id)


async def test_transient__direct_call_outside_a_run_returns_the_result(offline_kit: Kit) -> None:
    quick, attempts = _flaky_flow(offline_kit)
    result = await quick(5)  # no engine, no database
    assert result["charged"] == 10
    assert attempts == [5, 5, 5]


async def test_transient__direct_call_of_a_sync_workflow_returns_the_value(
    offline_kit: Kit,
) -> None:
    @offline_kit.step("double")
    def double(n: int) -> int:
        return n * 2

    @offline_kit.workflow("sync-quick", durable=False)
    def sync_quick(n: int) -> int:
        cairn.sleep("10ms")
        return double(n)

    assert await asyncio.to_thread(sync_quick, 4) == 8  # a plain thread, as a script is
    assert sync_quick(5) == 10  # from a thread running a loop: the run gets its own


async def test_transient__direct_call_failure_and_reserved_keyword(offline_kit: Kit) -> None:
    @offline_kit.workflow("fails-direct", durable=False)
    async def fails(queue: str = "") -> None:
        raise RuntimeError(f"bad {queue}")

    with pytest.raises(cairn.RunFailed, match="bad x"):
        await fails("x")
    with pytest.raises(TypeError, match="keyword 'queue' of a direct call"):
        await fails(queue="x")


async def test_transient__a_durable_workflow_called_outside_a_run_is_not_in_run(
    offline_kit: Kit,
) -> None:
    @offline_kit.workflow("durable-one")
    async def durable_one() -> None:
        return None

    with pytest.raises(cairn.NotInRun, match=r"engine\.start"):
        durable_one()


# refusals


def test_transient__refuses_a_queue_or_on_at_declaration(offline_kit: Kit) -> None:
    async def body() -> None:
        return None

    with pytest.raises(cairn.TransientWorkflow, match=r"'q1' is transient.*queue='mail'"):
        offline_kit.workflow("q1", durable=False, queue="mail")(body)
    with pytest.raises(cairn.TransientWorkflow, match=r"'q2' is transient.*on='order.new'"):
        offline_kit.workflow("q2", durable=False, on="order.new")(body)
    with pytest.raises(TypeError, match="durable of workflow 'q3' must be True or False"):
        offline_kit.workflow("q3", durable="no")(body)
    assert "q1" not in offline_kit.registry.workflows


def test_transient__refuses_a_schedule_in_code(offline_kit: Kit) -> None:
    @offline_kit.workflow("nightly", durable=False)
    async def nightly() -> None:
        return None

    with pytest.raises(cairn.TransientWorkflow, match=r"'nightly' is transient.*scheduled"):
        cairn.schedule(nightly, every="1h")


async def test_transient__refuses_queue_schedules_and_workers_zero(kit: Kit) -> None:
    quick, _ = _flaky_flow(kit)
    async with kit.engine() as engine:
        with pytest.raises(cairn.TransientWorkflow, match=r"'quick' is transient.*queue='mail'"):
            await engine.start(quick, 1, queue="mail")
        with pytest.raises(cairn.TransientWorkflow, match=r"'quick' is transient.*scheduled"):
            await engine.schedules.create("s1", quick, every="1h")
        with pytest.raises(cairn.TransientWorkflow, match=r"'quick' is transient.*scheduled"):
            await engine.schedules.create("s2", "quick", every="1h")
        assert await engine.schedules.list() == []
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.TransientWorkflow, match=r"'quick' .*queued for workers"):
            await engine.start(quick, 1)
        assert await engine.store.read(runs.list_runs(RunQuery(limit=10))) == []


async def test_transient__client_start_is_refused(kit: Kit) -> None:
    quick, _ = _flaky_flow(kit)
    client = await asyncio.to_thread(cairn.Client, kit.url)
    try:
        with pytest.raises(
            cairn.TransientWorkflow, match=r"'quick' .*queued for workers .by Client.start"
        ):
            await asyncio.to_thread(client.start, quick, 1)
    finally:
        await asyncio.to_thread(client.close)
    async with kit.engine(workers=0) as engine:
        assert await engine.store.read(runs.list_runs(RunQuery(limit=10))) == []


async def test_transient__a_durable_parent_cannot_start_one_as_child(kit: Kit) -> None:
    quick, attempts = _flaky_flow(kit)

    @kit.workflow("parent")
    async def parent() -> Any:
        return await quick(1)

    async with kit.engine() as engine:
        handle = await engine.start(parent)
        with pytest.raises(cairn.RunFailed) as caught:
            await handle.result(timeout=WAIT)
        assert caught.value.error_type == "cairn.errors.TransientWorkflow"
        assert "'quick' is transient" in caught.value.error_message
        assert "durable run cannot start it as a child" in caught.value.error_message
        assert attempts == []


async def test_transient__a_transient_run_cannot_emit(kit: Kit) -> None:
    @kit.workflow("listener", on="thing.done")
    async def listener(payload: Any) -> Any:
        return payload

    @kit.workflow("emitter", durable=False)
    async def emitter() -> Any:
        return await cairn.emit("thing.done", {"n": 1})

    async with kit.engine() as engine:
        handle = await engine.start(emitter)
        with pytest.raises(cairn.RunFailed, match=r"'emitter' is transient.*cannot emit"):
            await handle.result(timeout=WAIT)
        assert await engine.store.read(runs.list_runs(RunQuery(limit=10))) == []


async def test_transient__a_worker_never_claims_one(kit: Kit) -> None:
    """A run stored under the name (queued by code that thought it durable) stays queued."""
    _, attempts = _flaky_flow(kit)
    async with kit.fresh().engine(workers=0) as starter:  # does not know the workflow
        stored = await starter.start("quick", 1, allow_unknown=True)
    async with kit.engine() as worker_engine:
        assert worker_engine.worker is not None
        assert await worker_engine.worker.claim_once() == 0
        run = await worker_engine.control.record(stored.run_id)
        assert run.status == "PENDING"
    assert attempts == []


async def test_transient__test_engine_advances_its_sleeps() -> None:
    registry = cairn.Registry()

    async def napper() -> str:
        await cairn.sleep("1h")
        return "rested"

    from cairn.authoring.workflow import make_workflow

    flow = make_workflow(napper, name="napper", durable=False, reg=registry)
    async with TestEngine(registry=registry) as env:
        handle = await env.start(flow)
        await env.settle()
        assert await handle.status() == cairn.RunStatus.SLEEPING
        await env.advance("1h")
        assert await handle.result(timeout=WAIT) == "rested"
        assert list(await env.list_runs()) == []


async def test_transient__its_handle_sends_events_and_cancels(kit: Kit) -> None:
    @kit.workflow("ask", durable=False)
    async def ask() -> Any:
        return await cairn.wait_for_event("answer", timeout="1m")

    async with kit.engine() as engine:
        answered = await engine.start(ask)
        await answered.send_event("answer", {"ok": True})
        assert await answered.result(timeout=WAIT) == {"ok": True}
        stopped = await engine.start(ask)
        await stopped.cancel()
        with pytest.raises(cairn.RunCancelled):
            await stopped.result(timeout=WAIT)
        await _no_trace_of(engine, answered.run_id)
