"""What a run does when the database fails a write: wait, settle, fail once, or hand back.

Failures are injected at the Store seam of a real store on each backend (the chaos suite
makes the real ones: stopped servers, dropped connections, held locks).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import cairn
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
        real = engine.store.record_step
        refusals = []

        async def away(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and len(refusals) < 3:
                refusals.append(step.key)
                raise cairn.StoreUnavailable("database test: unreachable (simulated)")
            await real(lease, step)

        engine.store.record_step = away  # type: ignore[method-assign]
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
        real = engine.store.record_step
        lost: list[str] = []

        async def lossy(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and not lost:
                lost.append(step.key)
                if landed:
                    await real(lease, step)
                raise cairn.StoreUnavailable("reply lost (simulated)", unknown=True)
            await real(lease, step)

        engine.store.record_step = lossy  # type: ignore[method-assign]
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
        real = engine.store.record_step

        async def picky(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and step.status == "completed":
                raise cairn.StoreRefused("database test: value too long (simulated)")
            await real(lease, step)

        engine.store.record_step = picky  # type: ignore[method-assign]
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
        real = engine.store.record_step
        broken: list[str] = []

        async def flaky(lease: Lease, step: StepRecord) -> None:
            if step.name == "sf.b" and len(broken) < 3:
                broken.append(step.key)
                raise cairn.StoreError("database test: broken (simulated)")
            await real(lease, step)

        engine.store.record_step = flaky  # type: ignore[method-assign]
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == ["a", "b"]
        stored = await engine.control.record(run.run_id)

    assert len(broken) == 3
    assert calls == {"a": 1, "b": 4}  # b's outcome never reached the journal before
    assert (stored.attempt, stored.recoveries, stored.max_recoveries) == (4, 0, 1)
