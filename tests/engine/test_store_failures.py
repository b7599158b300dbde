"""What a run does when the database fails a write: wait, settle, fail once, or hand back.

Failures are injected at the Store seam of a real store on each backend (the chaos suite
makes the real ones: stopped servers, dropped connections, held locks). The tests at the
end are PostgreSQL's: its connections are dropped for real under a running engine.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from tests.engine.intercept import intercept

import cairn
from cairn.store.programs import journal
from cairn.store.records import Lease, StepRecord

from .kit import WAIT, Kit


def _flow(kit: Kit, calls: Counter[str], *, result: Any = "b") -> Any:
    @kit.step("sf.a")
    async def a() -> str:
        calls["a"] += 1
        return "a"

    @kit.step("sf.b", retries=3)
    async def b() -> Any:
        calls["b"] += 1
        return result

    @kit.workflow("sf.flow", max_recoveries=1)
    async def flow() -> Any:
        return [await a(), await b()]

    return flow


async def test_unavailable__a_step_outcome_is_sent_again_until_it_lands(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    flow = _flow(kit, calls)
    async with kit.engine() as engine:
        refusals = []

        async def away(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and len(refusals) < 3:
                refusals.append(step.key)
                raise cairn.StoreUnavailable("database test: unreachable (simulated)")
            await real(lease, step)

        real, _ = intercept(engine.store, journal.record_step, away, plain=True)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == ["a", "b"]
        stored = await engine.control.record(run.run_id)

    assert refusals == ["sf.b#1"] * 3
    assert calls == {"a": 1, "b": 1}  # waited the outage out: nothing ran twice
    assert (stored.attempt, stored.recoveries) == (1, 0)


@pytest.mark.parametrize("landed", [True, False])
async def test_unknown_outcome__the_journal_says_whether_the_step_landed(
    kit: Kit, landed: bool
) -> None:
    # The reply to a step write was lost: it committed (landed) or not. Either way the
    # step body runs once, and the run goes on in the same attempt.
    calls: Counter[str] = Counter()
    flow = _flow(kit, calls)
    async with kit.engine() as engine:
        lost: list[str] = []

        async def lossy(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and not lost:
                lost.append(step.key)
                if landed:
                    await real(lease, step)
                raise cairn.StoreUnavailable("reply lost (simulated)", unknown=True)
            await real(lease, step)

        real, _ = intercept(engine.store, journal.record_step, lossy, plain=True)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == ["a", "b"]
        history = await engine.history(run.run_id)

    assert lost == ["sf.b#1"]
    assert calls == {"a": 1, "b": 1}
    assert [(entry.key, entry.result) for entry in history] == [("sf.a#1", "a"), ("sf.b#1", "b")]


async def test_refused__a_result_the_database_never_takes_fails_the_step_once(
    kit: Kit,
) -> None:
    calls: Counter[str] = Counter()
    flow = _flow(kit, calls)
    async with kit.engine() as engine:

        async def picky(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and step.status == "completed":
                raise cairn.StoreRefused("database test: value too long (simulated)")
            await real(lease, step)

        real, _ = intercept(engine.store, journal.record_step, picky, plain=True)
        run = await engine.start(flow)
        with pytest.raises(cairn.RunFailed) as failed:
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
        stored = await engine.control.record(run.run_id)

    assert calls == {"a": 1, "b": 1}  # not retried, not recovered: it would never land
    assert "sf.b" in str(failed.value)
    assert "refused" in str(failed.value)
    assert failed.value.error_type == "cairn.errors.StoreRefused"
    assert [(entry.key, entry.status) for entry in history] == [
        ("sf.a#1", "completed"),
        ("sf.b#1", "failed"),
    ]
    assert stored.recoveries == 0


async def test_hand_backs__do_not_count_as_recoveries(kit: Kit) -> None:
    # An attempt ended by the database (a failure neither "unavailable" nor "refused")
    # is handed back and claimed again: more often than max_recoveries, yet not poisoned.
    calls: Counter[str] = Counter()
    flow = _flow(kit, calls)
    async with kit.engine() as engine:
        broken: list[str] = []

        async def flaky(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and len(broken) < 3:
                broken.append(step.key)
                raise cairn.StoreError("database test: broken (simulated)")
            await real(lease, step)

        real, _ = intercept(engine.store, journal.record_step, flaky, plain=True)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == ["a", "b"]
        stored = await engine.control.record(run.run_id)

    assert len(broken) == 3
    assert calls == {"a": 1, "b": 4}  # b's outcome never reached the journal before
    assert (stored.attempt, stored.recoveries, stored.max_recoveries) == (4, 0, 1)


# PostgreSQL only: real connections dropped under a running engine (a server restart or a
# proxy cutting idle connections does this). Every session on the test database but the
# killer's own ends; the engine must notice on its next use of each and go on.
KILL = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


class Killer:
    """Ends every other session on the test database, from a connection of its own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self.killed = 0

    def __call__(self) -> int:
        row = self._conn.execute(KILL).fetchone()
        count = 0 if row is None else int(row[0])
        self.killed += count
        return count

    def close(self) -> None:
        self._conn.close()


@pytest.fixture
def pg_kit(pg_url: str) -> Kit:
    """A private registry on a fresh PostgreSQL database."""
    return Kit(pg_url)


@pytest.fixture
def killer(pg_url: str) -> Iterator[Killer]:
    kill = Killer(pg_url)
    yield kill
    kill.close()


async def _status(engine: cairn.Engine, run_id: str, *statuses: cairn.RunStatus) -> None:
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run_id)).status not in statuses:
            await asyncio.sleep(0.01)  # polling the database, not synchronising


def _waiter(kit: Kit, calls: Counter[str]) -> Any:
    @kit.step("drop.before")
    async def before() -> str:
        calls["before"] += 1
        return "before"

    @kit.step("drop.after")
    async def after(value: Any) -> str:
        calls["after"] += 1
        return f"after {value}"

    @kit.workflow("drop.waiter")
    async def waiter() -> list[str]:
        first = await before()
        return [first, await after(await cairn.wait_for_event("go"))]

    return waiter


async def test_dropped_connections__starts_and_claims_are_retried(
    pg_kit: Kit, killer: Killer
) -> None:
    calls: Counter[str] = Counter()
    waiter = _waiter(pg_kit, calls)
    async with pg_kit.engine() as worker, pg_kit.engine(workers=0) as queuer:
        await asyncio.sleep(0.1)  # both idle, listening and polling
        assert killer() > 0
        runs = [await queuer.start(waiter, run_id=f"claimed-{i}") for i in range(5)]
        for run in runs:  # the worker claims them on its new connections
            await _status(worker, run.run_id, cairn.RunStatus.WAITING)
        assert killer() > 0
        for run in runs:
            await queuer.send_event(run.run_id, "go", run.run_id)
        results = [await run.result(timeout=WAIT) for run in runs]
    assert results == [["before", f"after {run.run_id}"] for run in runs]
    assert calls == {"before": 5, "after": 5}


async def test_dropped_connections__control_actions_are_retried(
    pg_kit: Kit, killer: Killer
) -> None:
    calls: Counter[str] = Counter()
    waiter = _waiter(pg_kit, calls)
    async with pg_kit.engine() as engine:
        doomed = await engine.start(waiter, run_id="doomed")
        held = await engine.start(waiter, run_id="held")
        for run in (doomed, held):
            await _status(engine, run.run_id, cairn.RunStatus.WAITING)
        assert killer() > 0
        await engine.cancel("doomed")  # delivered into the workflow, which then ends
        assert killer() > 0
        assert await engine.pause("held") == cairn.RunStatus.PAUSED
        assert killer() > 0
        await engine.send_event("held", "go", "while paused")
        assert killer() > 0
        assert await engine.resume("held") != cairn.RunStatus.PAUSED
        with pytest.raises(cairn.RunCancelled):
            await doomed.result(timeout=WAIT)
        assert await held.result(timeout=WAIT) == ["before", "after while paused"]
    assert calls == {"before": 2, "after": 1}


async def test_dropped_connections__control_of_a_run_inside_a_step_is_retried(
    pg_kit: Kit, killer: Killer
) -> None:
    # Pause and cancel reach a run in the middle of a step: the step's outcome, the
    # pause's park and the cancel's end are then written on connections found dead.
    entered = {"paused": threading.Event(), "cancelled": threading.Event()}
    release = threading.Event()

    @pg_kit.step("drop.busy")
    def busy(label: str) -> str:
        entered[label].set()
        release.wait(WAIT)
        return label

    @pg_kit.workflow("drop.steered")
    async def steered(label: str) -> str:
        done = await busy(label)
        await cairn.sleep("100ms")
        return done

    async with pg_kit.engine() as engine:
        paused = await engine.start(steered, "paused", run_id="paused")
        cancelled = await engine.start(steered, "cancelled", run_id="cancelled")
        for label in entered:
            assert await asyncio.to_thread(entered[label].wait, WAIT)
        assert killer() > 0
        await engine.pause("paused")
        assert killer() > 0
        await engine.cancel("cancelled")
        assert killer() > 0
        release.set()
        await _status(engine, "paused", cairn.RunStatus.PAUSED)
        with pytest.raises(cairn.RunCancelled):
            await cancelled.result(timeout=WAIT)
        assert killer() > 0
        await engine.resume("paused")
        assert await paused.result(timeout=WAIT) == "paused"
        history = await engine.history("paused")
    assert [(entry.key, entry.status) for entry in history] == [
        ("drop.busy#1", "completed"),  # written once, on a new connection
        ("~sleep#1", "completed"),
    ]


async def test_dropped_connections__a_run_parks_and_finishes_on_new_ones(
    pg_kit: Kit, killer: Killer
) -> None:
    # The step body drops every connection, so the run's next writes (the step's
    # outcome, then the park of its sleep and of its wait, then its end) meet dead ones.
    calls: Counter[str] = Counter()

    @pg_kit.step("drop.cut")
    def cut(label: str) -> str:
        calls[label] += 1
        killer()
        return label

    @pg_kit.workflow("drop.parker")
    async def parker() -> list[Any]:
        done = [await cut("one")]
        await cairn.sleep("200ms")
        done.append(await cut("two"))
        done.append(await cairn.wait_for_event("go"))
        done.append(await cut("three"))
        return done

    async with pg_kit.engine() as engine:
        run = await engine.start(parker, run_id="parker")
        await _status(engine, "parker", cairn.RunStatus.WAITING)
        await engine.send_event("parker", "go", "event")
        assert await run.result(timeout=WAIT) == ["one", "two", "event", "three"]
        stored = await engine.control.record("parker")
    assert calls == {"one": 1, "two": 1, "three": 1}
    assert stored.recoveries == 0
    assert killer.killed >= 3


async def test_dropped_connections__a_busy_engine_rides_out_repeated_drops(
    pg_kit: Kit, killer: Killer
) -> None:
    calls: Counter[str] = Counter()
    waiter = _waiter(pg_kit, calls)
    async with pg_kit.engine() as engine:

        async def chaos() -> None:
            for _ in range(8):
                await asyncio.sleep(0.05)
                await asyncio.to_thread(killer)

        async def one(i: int) -> Any:
            run = await engine.start(waiter, run_id=f"busy-{i}")
            if i % 4 == 3:
                await _status(engine, run.run_id, cairn.RunStatus.WAITING)
                await run.cancel()
                return None
            await _status(engine, run.run_id, cairn.RunStatus.WAITING)
            await run.send_event("go", i)
            return await run.result(timeout=WAIT)

        _, *results = await asyncio.gather(chaos(), *(one(i) for i in range(20)))
    assert killer.killed > 0
    assert results == [None if i % 4 == 3 else ["before", f"after {i}"] for i in range(20)]
    assert calls == {"before": 20, "after": 15}
