"""Retention on a running engine: what an unfinished run depends on stays, the rest goes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.clock import VirtualClock
from cairn.errors import ConfigError
from cairn.runtime import retention
from cairn.store.programs import journal
from cairn.store.programs import runs as run_ops
from cairn.store.programs.prune import RUN_TABLES
from cairn.store.records import RunQuery

from .kit import WAIT, Kit

UNFINISHED = ("PENDING", "RUNNING", "SLEEPING", "WAITING", "PAUSED")


def _declare(kit: Kit, reports: list[Any] | None = None) -> dict[str, Any]:
    @kit.step("ret.report")
    def report(value: Any) -> None:
        if reports is not None:
            reports.append(value)

    @kit.step("ret.work")
    def work(x: int) -> int:
        return x * 2

    @kit.workflow("ret.child")
    async def child(x: int) -> int:
        await cairn.sleep(0.01)
        return await work(x)

    @kit.workflow("ret.parent")
    async def parent(n: int) -> list[int]:
        found = [await child(i) for i in range(n)]  # one after another: early ones finish
        await report(found)
        return found

    @kit.workflow("ret.chain")
    async def chain(n: int, until: int) -> int:
        await work(n)
        await cairn.sleep(0.005)
        if n < until:
            cairn.continue_as_new(n + 1, until)
        await report(n)
        return n

    @kit.workflow("ret.plain")
    async def plain(x: int) -> int:
        return await work(x)

    return {"parent": parent, "chain": chain, "plain": plain}


async def _check_dependencies(store: Any, errors: list[str]) -> None:
    """Once: every unfinished run still has the runs it depends on."""
    children_seen: dict[str, int] = {}
    for status in UNFINISHED:
        for run in await store.read(run_ops.list_runs(RunQuery(status=status, limit=1000))):
            if run.continued_from is not None:
                before = await store.read(run_ops.get_run(run.continued_from))
                now = await store.read(run_ops.get_run(run.run_id))
                if before is None and now is not None and now.status in UNFINISHED:
                    errors.append(f"{run.run_id}: its predecessor was pruned while it ran")
            if run.workflow == "ret.parent":
                kids = len(
                    await store.read(run_ops.list_runs(RunQuery(parent_id=run.run_id, limit=1000)))
                )
                now = await store.read(run_ops.get_run(run.run_id))
                if now is not None and now.status in UNFINISHED:
                    if kids < children_seen.get(run.run_id, 0):
                        errors.append(f"{run.run_id}: a child was pruned while it ran")
                    children_seen[run.run_id] = kids


async def test_retention__pruning_while_workers_run_keeps_what_unfinished_runs_need(
    kit: Kit,
) -> None:
    reports: list[Any] = []
    flows = _declare(kit, reports)
    errors: list[str] = []
    pruned: list[int] = []
    async with kit.engine(workers=16) as engine, kit.engine(workers=0) as other:
        stop = asyncio.Event()

        async def prune_and_check(store: Any) -> None:
            while not stop.is_set():
                # Everything finished counts as old: only dependencies keep a run.
                count = await retention.prune(
                    store, finished_before=engine.clock.now() + 1, batch=7, pause=0
                )
                pruned.append(count)
                await _check_dependencies(store, errors)
                await asyncio.sleep(0.002)

        pruners = [asyncio.create_task(prune_and_check(e.store)) for e in (engine, other)]
        for _ in range(3):
            await engine.start(flows["parent"], 4)
            await engine.start(flows["chain"], 0, 5)
        for i in range(20):
            await engine.start(flows["plain"], i)
        # Handles cannot wait here: a finished run may be gone before they look.
        async with asyncio.timeout(WAIT):
            while set(await engine.store.read(run_ops.count_runs(RunQuery()))) & set(UNFINISHED):
                await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*pruners)
        left = await retention.prune(engine.store, finished_before=engine.clock.now() + 1)

    assert errors == []
    assert sorted(reports, key=str) == [5] * 3 + [[0, 2, 4, 6]] * 3
    assert sum(pruned) + left == 3 * 5 + 3 * 6 + 20  # every run, once finished
    for table in ("runs", *RUN_TABLES):  # nothing left behind
        assert execute(kit.url, f"SELECT COUNT(*) FROM {table}")[0][0] == 0, table


async def test_retention__engine_prunes_runs_finished_longer_ago(kit: Kit) -> None:
    flows = _declare(kit)
    clock = VirtualClock(start=1_700_000_000.0)
    async with kit.engine(clock=clock) as engine:
        old = await engine.start(flows["plain"], 1)
        assert await old.result(timeout=WAIT) == 2
        clock.advance(40 * 86400)
        young = await engine.start(flows["plain"], 2)
        assert await young.result(timeout=WAIT) == 4
    async with kit.engine(clock=clock, retention="30d") as engine:
        # The engine prunes as it opens, then every minute.
        async with asyncio.timeout(WAIT):
            while await engine.store.read(run_ops.get_run(old.run_id)) is not None:
                await asyncio.sleep(0.01)
        assert await engine.store.read(journal.load_journal(old.run_id)) == []
        assert await engine.store.read(run_ops.get_run(young.run_id)) is not None
        assert engine.pruner is not None
        assert await engine.pruner.prune_now() == 0


async def test_retention__default_keeps_everything(kit: Kit) -> None:
    async with kit.engine() as engine:
        assert engine.retention is None
        assert engine.pruner is None


@pytest.mark.parametrize("bad", ["soon", "0s", "2 months", -5, True])
def test_retention__a_bad_value_is_named(bad: object) -> None:
    with pytest.raises(ConfigError, match="retention"):
        cairn.Engine("sqlite:///:memory:", retention=bad)
