"""Columns and progress: stored, filterable with list_runs(columns=...), shown in summaries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
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


async def test_set_columns__stored_filterable_and_summarised(kit: Kit) -> None:
    @kit.workflow("columns.order")
    async def order(no: int, customer: str) -> str:
        cairn.set_columns(order_no=no, customer=customer, status="fetched")
        await cairn.wait_for_event("ship")
        cairn.set_columns(status="shipped")
        return "ok"

    async with kit.engine() as engine:
        runs = [await engine.start(order, no, c) for no, c in ((123, "ann"), (124, "bob"))]
        for run in runs:
            await until(engine, run.run_id, "WAITING")
        [found] = await engine.list_runs(columns={"order_no": 123})
        assert found.run_id == runs[0].run_id
        assert found.columns == {"order_no": 123, "customer": "ann", "status": "fetched"}
        assert len(await engine.list_runs(columns={"status": "fetched"})) == 2
        assert len(await engine.list_runs(columns={"order_no": "123"})) == 0  # typed values
        assert len(await engine.list_runs(columns={"order_no": 124, "customer": "ann"})) == 0
        assert len(await engine.list_runs(columns={"nothing": 1})) == 0

        await runs[0].send_event("ship")
        await runs[0].result(timeout=WAIT)
        [shipped] = await engine.list_runs(columns={"status": "shipped"})
        [waiting] = await engine.list_runs(columns={"status": "fetched"}, status="WAITING")
        assert len(await engine.list_runs(columns={"status": "shipped"}, status="WAITING")) == 0
    assert (shipped.run_id, waiting.run_id) == (runs[0].run_id, runs[1].run_id)
    assert shipped.columns == {"order_no": 123, "customer": "ann", "status": "shipped"}


async def test_set_columns__kept_across_unload_and_replay(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("columns.replayed")
    async def replayed() -> None:
        cairn.set_columns(stage="one", fixed=[1, {"a": None}])
        await cairn.sleep("1h")
        cairn.set_columns(stage="two", extra=True)

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(replayed)
        await until(engine, run.run_id, "SLEEPING")
        [asleep] = await engine.list_runs()
        clock.advance(3600)
        await run.result(timeout=WAIT)
        [done] = await engine.list_runs(columns={"stage": "two", "fixed": [1, {"a": None}]})
    assert asleep.columns == {"stage": "one", "fixed": [1, {"a": None}]}
    assert done.columns == {"stage": "two", "fixed": [1, {"a": None}], "extra": True}


async def test_progress__stored_and_shown(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.step("chunk")
    async def chunk(i: int) -> int:
        return i

    @kit.workflow("columns.progress")
    async def progressing(n: int) -> None:
        for i in range(n):
            await chunk(i)
            cairn.progress(f"chunk {i + 1} of {n}", current=i + 1, total=n)
        await cairn.wait_for_event("end")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(progressing, 3)
        await until(engine, run.run_id, "WAITING")
        [summary] = await engine.list_runs()
        await run.send_event("end")
        await run.result(timeout=WAIT)
    assert summary.progress == {
        "message": "chunk 3 of 3",
        "current": 3,
        "total": 3,
        "at": pytest.approx(clock.now()),
    }


async def test_set_columns__bad_value_raises_value_error_naming_the_column(kit: Kit) -> None:
    @kit.workflow("columns.bad")
    async def bad() -> str:
        cairn.set_columns(good=1)
        try:
            cairn.set_columns(when=object())
        except ValueError as exc:
            return str(exc)
        return "stored"

    async with kit.engine() as engine:
        run = await engine.start(bad)
        message = await run.result(timeout=WAIT)
        [summary] = await engine.list_runs()
    assert "'when'" in message
    assert summary.columns == {"good": 1}


async def test_set_columns__outside_a_run_raises_not_in_run() -> None:
    with pytest.raises(cairn.NotInRun, match="set_columns"):
        cairn.set_columns(a=1)
    with pytest.raises(cairn.NotInRun, match="progress"):
        cairn.progress("halfway")


async def test_set_columns__from_steps_and_sync_workflows(kit: Kit) -> None:
    @kit.step("tag")
    def tag(value: str) -> str:
        cairn.set_columns(tagged_by_step=value)
        cairn.progress("tagged")
        return value

    @kit.workflow("columns.sync")
    def sync_wf() -> str:
        cairn.set_columns(kind="sync")
        return str(tag("yes"))

    async with kit.engine() as engine:
        run = await engine.start(sync_wf)
        assert await run.result(timeout=WAIT) == "yes"
        [summary] = await engine.list_runs(columns={"tagged_by_step": "yes"})
    assert summary.columns == {"kind": "sync", "tagged_by_step": "yes"}
    assert summary.progress is not None and summary.progress["message"] == "tagged"


async def test_list_runs__columns_filter_pages(kit: Kit) -> None:
    @kit.workflow("columns.many")
    async def many(i: int) -> Any:
        cairn.set_columns(group=i % 2)
        return i

    async with kit.engine() as engine:
        for i in range(6):
            await (await engine.start(many, i)).result(timeout=WAIT)
        first = await engine.list_runs(columns={"group": 0}, limit=2)
        rest = await engine.list_runs(columns={"group": 0}, limit=2, cursor=first.next_cursor)
    assert len(first) == 2 and len(rest) == 1 and rest.next_cursor is None
    assert all(r.columns == {"group": 0} for r in [*first, *rest])
