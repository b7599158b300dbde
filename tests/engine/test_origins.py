"""What started a run is recorded when it is created, and runs can be listed by it."""

from __future__ import annotations

from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


async def test_origin__each_way_of_starting_a_run_is_recorded(kit: Kit) -> None:
    @kit.step("add")
    async def add(a: int, b: int) -> int:
        return a + b

    @kit.workflow("origin.child")
    async def child(n: int) -> int:
        return await add(n, 1)

    @kit.workflow("origin.parent")
    async def parent(n: int) -> int:
        if n == 0:
            cairn.continue_as_new(1)
        return await child(n)

    @kit.workflow("origin.heard", on="thing.happened")
    async def heard(payload: Any) -> Any:
        return payload

    async with kit.engine() as engine:
        first = await engine.start(parent, 0, run_id="p")
        assert await first.result(timeout=WAIT) == 2
        [emitted] = await engine.emit("thing.happened", {"x": 1})
        await emitted.result(timeout=WAIT)
        await engine.schedules.create("nightly", child, cron="0 3 * * *", args=[5])
        ticked = await engine.schedules.trigger("nightly")
        await ticked.result(timeout=WAIT)
        restarted = await engine.restart("p")
        await restarted.result(timeout=WAIT)
        forked = await engine.fork(first.run_id, 1)
        await forked.result(timeout=WAIT)

        runs = {run.run_id: run for run in (await engine.list_runs()).runs}
        by_origin = {
            origin: {run.run_id for run in (await engine.list_runs(origin=origin)).runs}
            for origin in cairn.models.ORIGINS
        }
        unknown = await engine.list_runs(origin="UNKNOWN")

    [successor] = [r for r in runs.values() if r.continued_from == "p"]
    [child_run] = [r for r in runs.values() if r.parent_id == successor.run_id]
    assert runs["p"].origin == "api"
    assert successor.origin == "continue"
    assert child_run.origin == "parent"
    assert runs[emitted.run_id].origin == "trigger"
    assert runs[ticked.run_id].origin == "schedule"
    assert runs[restarted.run_id].origin == "restart"
    assert runs[forked.run_id].origin == "fork"
    assert by_origin["api"] == {"p"}
    assert by_origin["fork"] == {forked.run_id}
    assert sum(len(ids) for ids in by_origin.values()) == len(runs)
    assert unknown.runs == []


async def test_list_runs__a_bad_origin_or_prefix_is_named(kit: Kit) -> None:
    async with kit.engine(workers=0) as engine:
        with pytest.raises(ValueError, match=r"unknown run origin 'cron'.*api, schedule"):
            await engine.list_runs(origin="cron")
        with pytest.raises(cairn.InvalidName, match="run id prefix"):
            await engine.list_runs(run_id_prefix="")
        with pytest.raises(cairn.InvalidName, match="NUL"):
            await engine.list_runs(run_id_prefix="a\x00")


async def test_list_runs__by_prefix_time_range_and_counts(kit: Kit) -> None:
    @kit.workflow("origin.noop")
    async def noop() -> None:
        return None

    async with kit.engine(workers=0) as engine:  # nothing executes: all stay PENDING
        for run_id in ("inv-1", "inv-2", "inv-10", "rcpt-1"):
            await engine.start(noop, run_id=run_id)
        listed = await engine.list_runs(run_id_prefix="inv-1")
        # The stored times exactly (a datetime rounds them to the microsecond).
        second, third = [(await engine.control.record(r)).created_at for r in ("inv-2", "inv-10")]
        between = await engine.list_runs(since=second, until=third)
        counts = await engine.control.count_runs(run_id_prefix="inv")

    assert [run.run_id for run in listed] == ["inv-10", "inv-1"]
    assert [run.run_id for run in between] == ["inv-2"]
    assert counts[cairn.RunStatus.PENDING] == 3
    assert counts[cairn.RunStatus.COMPLETED] == 0
    assert set(counts) == set(cairn.RunStatus)
