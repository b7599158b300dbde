"""The engine's surface: start, get, list_runs, history, RunStatus, RunHandle, current_run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.engine.intercept import intercept

import cairn
from cairn.store.programs import runs

from .kit import WAIT, Gate, Kit


async def test_start__idempotent_on_run_id_whatever_the_arguments(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("record")
    def record(x: int) -> int:
        calls.append(x)
        return x

    @kit.workflow("api.idempotent")
    async def idempotent(x: int) -> int:
        return await record(x) * 10

    @kit.workflow("api.other")
    async def other() -> str:
        return "other"

    async with kit.engine() as engine:
        handles = await asyncio.gather(
            *(engine.start(idempotent, n, run_id="order-1") for n in (1, 2, 3))
        )
        assert {h.run_id for h in handles} == {"order-1"}
        assert await handles[0].result(timeout=WAIT) in (10, 20, 30)
        again = await engine.start(other, run_id="order-1")
        later = await engine.start(idempotent, 99, run_id="order-1", delay="1h")
        assert again == later == handles[0]
        assert await again.result(timeout=WAIT) == calls[0] * 10
        runs = list(await engine.list_runs())
    assert len(calls) == 1
    assert [(r.run_id, r.workflow) for r in runs] == [("order-1", "api.idempotent")]


async def test_start__new_run_ids_are_unique(kit: Kit) -> None:
    @kit.workflow("api.unique")
    async def unique() -> None:
        return None

    async with kit.engine(workers=0) as engine:
        ids = {(await engine.start(unique)).run_id for _ in range(5)}
        with pytest.raises(ValueError, match="run_id"):
            await engine.start(unique, run_id="")
    assert len(ids) == 5


async def test_get__unknown_run_raises_run_not_found(kit: Kit) -> None:
    @kit.workflow("api.known")
    async def known() -> int:
        return 7

    async with kit.engine() as engine:
        run = await engine.start(known, run_id="known-1")
        assert await (await engine.get("known-1")).result(timeout=WAIT) == 7
        assert await engine.get("known-1") == run
        with pytest.raises(cairn.RunNotFound, match="'missing-1'") as info:
            await engine.get("missing-1")
        assert info.value.run_id == "missing-1"
        with pytest.raises(cairn.RunNotFound):
            await engine.history("missing-1")


async def test_result__timeout_raises_timeout_error(kit: Kit) -> None:
    @kit.workflow("api.never_runs")
    async def never_runs() -> None:
        return None

    async with kit.engine(workers=0) as engine:  # nobody executes: the run stays PENDING
        run = await engine.start(never_runs)
        with pytest.raises(TimeoutError, match=run.run_id):
            await run.result(timeout=0.05)
        assert await run.status() == cairn.RunStatus.PENDING


async def test_result__of_a_run_finished_here_needs_no_read_back(kit: Kit) -> None:
    # The worker hands its committed outcome to local waiters: a run alone then costs its
    # writes and nothing else. A failed run's error comes the same way.
    @kit.workflow("api.local_ok")
    async def local_ok(x: int) -> int:
        await asyncio.sleep(0.01)  # still executing when result() starts waiting
        return x * 2

    @kit.workflow("api.local_fail")
    async def local_fail() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("nope")

    async with kit.engine() as engine:
        ok = await engine.start(local_ok, 21)
        failing = await engine.start(local_fail)
        reads: list[str] = []

        async def counting(run_id: str) -> Any:
            reads.append(run_id)
            return await get_run(run_id)

        get_run, _ = intercept(engine.store, runs.get_run, counting, via="read")
        answers = await asyncio.gather(
            ok.result(timeout=WAIT), failing.result(timeout=WAIT), return_exceptions=True
        )

    assert answers[0] == 42
    assert isinstance(answers[1], cairn.RunFailed) and "nope" in str(answers[1])
    assert reads == []  # a run already over before result() is asked is read, of course


async def test_list_runs__filters_and_cursor_pagination(kit: Kit) -> None:
    @kit.workflow("api.listed_a")
    async def listed_a() -> None:
        return None

    @kit.workflow("api.listed_b")
    async def listed_b() -> None:
        raise RuntimeError("b fails")

    async with kit.engine() as engine:
        done = [await engine.start(listed_a) for _ in range(3)]
        failed = [await engine.start(listed_b) for _ in range(2)]
        for handle in done:
            await handle.result(timeout=WAIT)
        for handle in failed:
            with pytest.raises(cairn.RunFailed):
                await handle.result(timeout=WAIT)
    async with kit.engine(workers=0) as engine:
        pending = [await engine.start(listed_a) for _ in range(2)]
        created = [h.run_id for h in [*done, *failed, *pending]]

        everything = await engine.list_runs()
        assert [r.run_id for r in everything] == created[::-1]  # newest first
        assert everything.next_cursor is None and len(everything) == 7

        by_status = await engine.list_runs(status=cairn.RunStatus.COMPLETED)
        assert {r.run_id for r in by_status} == {h.run_id for h in done}
        assert [r.run_id for r in await engine.list_runs(status="failed")] == [
            h.run_id for h in failed[::-1]
        ]
        assert len(await engine.list_runs(status="PENDING")) == 2
        assert len(await engine.list_runs(workflow="api.listed_a")) == 5
        assert len(await engine.list_runs(workflow=listed_b, status="FAILED")) == 2
        assert len(await engine.list_runs(workflow="api.nothing")) == 0

        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await engine.list_runs(limit=3, cursor=cursor)
            pages += 1
            assert len(page) <= 3
            seen.extend(r.run_id for r in page)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert (pages, seen) == (3, created[::-1])

        filtered = await engine.list_runs(workflow="api.listed_a", limit=4)
        rest = await engine.list_runs(workflow="api.listed_a", limit=4, cursor=filtered.next_cursor)
        assert [r.run_id for r in [*filtered, *rest]] == [h.run_id for h in [*done, *pending][::-1]]

        with pytest.raises(ValueError, match="'sleepy'"):
            await engine.list_runs(status="sleepy")
        with pytest.raises(ValueError, match="cursor"):
            await engine.list_runs(cursor="garbage")
        with pytest.raises(ValueError, match="limit"):
            await engine.list_runs(limit=0)


async def test_list_runs__summary_fields(kit: Kit) -> None:
    @kit.workflow("api.summary")
    async def summarised() -> str:
        return "done"

    async with kit.engine() as engine:
        run = await engine.start(summarised)
        await run.result(timeout=WAIT)
        [summary] = await engine.list_runs()
    assert (summary.run_id, summary.workflow, summary.status) == (
        run.run_id,
        "api.summary",
        cairn.RunStatus.COMPLETED,
    )
    assert summary.created_at.tzinfo is not None
    assert summary.created_at <= summary.updated_at
    assert summary.started_at is not None
    assert summary.created_at <= summary.started_at <= summary.updated_at
    assert (summary.parent_id, summary.queue, summary.error, summary.columns) == (
        None,
        None,
        None,
        {},
    )


async def test_list_runs__started_at_is_none_until_a_worker_starts_the_run(kit: Kit) -> None:
    @kit.workflow("api.later")
    async def later() -> str:
        return "done"

    async with kit.engine() as engine:
        run = await engine.start(later, delay="1h")
        [listed] = await engine.list_runs()
        described = await run.describe()
    assert (listed.status, listed.started_at) == (cairn.RunStatus.PENDING, None)
    assert described.started_at is None
    # Made positionally, as before started_at existed, a summary still works.
    assert cairn.RunSummary("r", "w", listed.status, listed.created_at, listed.updated_at)


async def test_history__entries(kit: Kit) -> None:
    @kit.step("fetch")
    async def fetch(n: int) -> dict[str, int]:
        return {"n": n}

    @kit.step("broken", retries=cairn.Retry(max_attempts=2, delay=0, max_delay=0))
    def broken() -> None:
        raise ValueError("nope")

    @kit.workflow("api.history")
    async def historic() -> None:
        await fetch(1)
        await cairn.sleep(0.01)
        try:
            await broken()
        except cairn.StepFailed:
            pass
        await fetch(2)

    async with kit.engine() as engine:
        before = datetime.now(UTC)
        run = await engine.start(historic)
        await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert [(h.seq, h.kind, h.name, h.key, h.status, h.attempts) for h in history] == [
        (1, "step", "fetch", "fetch#1", "completed", 1),
        (2, "sleep", "sleep", "~sleep#1", "completed", 1),
        (3, "step", "broken", "broken#1", "failed", 2),
        (4, "step", "fetch", "fetch#2", "completed", 1),
    ]
    assert isinstance(history[0], cairn.HistoryEntry)
    assert (history[0].result, history[3].result, history[0].error) == ({"n": 1}, {"n": 2}, None)
    error = history[2].error
    assert error is not None
    assert (error["error_type"], error["message"], error["attempts"]) == (
        "builtins.ValueError",
        "nope",
        2,
    )
    for entry in history:
        assert entry.started_at is not None and entry.finished_at is not None
        assert before <= entry.started_at <= entry.finished_at
        assert entry.started_at.tzinfo is not None


def test_run_status__values() -> None:
    assert [s.value for s in cairn.RunStatus] == [
        "PENDING",
        "RUNNING",
        "SLEEPING",
        "WAITING",
        "PAUSED",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "CONTINUED",
    ]
    assert cairn.RunStatus.COMPLETED == "COMPLETED" and isinstance(cairn.RunStatus.FAILED, str)
    assert {s for s in cairn.RunStatus if s.finished} == {
        cairn.RunStatus.COMPLETED,
        cairn.RunStatus.FAILED,
        cairn.RunStatus.CANCELLED,
        cairn.RunStatus.CONTINUED,
    }
    assert cairn.RunStatus.parse("sleeping") is cairn.RunStatus.SLEEPING


async def test_current_run__in_workflow_and_steps_counts_attempts(kit: Kit, gate: Gate) -> None:
    seen: list[tuple[str, cairn.RunInfo]] = []

    @kit.step("async_info")
    async def async_info() -> int:
        seen.append(("async step", cairn.current_run()))
        return 1

    @kit.step("sync_info")
    def sync_info() -> int:
        seen.append(("sync step", cairn.current_run()))
        return 2

    @kit.step("gate")
    async def gate_step() -> str:
        seen.append(("gate", cairn.current_run()))
        return await gate()

    @kit.workflow("api.current_run")
    async def current() -> dict[str, Any]:
        info = cairn.current_run()
        seen.append(("workflow", info))
        await async_info()
        await sync_info()
        await gate_step()
        return {"attempt": cairn.current_run().attempt}

    first = kit.engine()
    await first.open()
    before = datetime.now(UTC)
    run = await first.start(current, run_id="current-1")
    await gate.hold(first)
    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == {"attempt": 2}

    where = [w for w, _ in seen]
    assert where == ["workflow", "async step", "sync step", "gate", "workflow", "gate"]
    for _, info in seen:
        assert isinstance(info, cairn.RunInfo)
        assert (info.run_id, info.workflow, info.parent_id, info.scheduled_at) == (
            "current-1",
            "api.current_run",
            None,
            None,
        )
        assert before.timestamp() - 1 <= info.started_at.timestamp() <= before.timestamp() + WAIT
    assert [info.attempt for _, info in seen] == [1, 1, 1, 1, 2, 2]
    assert len({info.started_at for _, info in seen}) == 1  # the run's first start
