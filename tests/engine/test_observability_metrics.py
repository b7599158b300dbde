"""Prometheus metrics of an engine: counters move as runs progress, gauges read the store."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import cairn
from cairn.authoring.schedules import make_schedule
from cairn.clock import VirtualClock
from cairn.observability import Metrics, metrics_app

from .kit import WAIT, Kit


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    transport = httpx.ASGITransport(app=metrics_app(metrics))
    async with httpx.AsyncClient(transport=transport, base_url="http://cairn") as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


async def test_metrics__runs_and_steps_are_counted_by_workflow_and_step(kit: Kit) -> None:
    tries = {"n": 0}

    @kit.step("flaky", retries=cairn.Retry(max_attempts=3, delay=0, max_delay=0, jitter=0))
    async def flaky() -> str:
        tries["n"] += 1
        if tries["n"] == 1:
            raise ConnectionError("down")
        return "ok"

    @kit.step("doomed", retries=1)
    async def doomed() -> None:
        raise ValueError("no")

    @kit.workflow("metrics.good")
    async def good() -> str:
        return await flaky()

    @kit.workflow("metrics.bad")
    async def bad() -> None:
        await doomed()

    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        assert engine.metrics is metrics
        assert await (await engine.start(good)).result(timeout=WAIT) == "ok"
        with pytest.raises(cairn.RunFailed):
            await (await engine.start(bad)).result(timeout=WAIT)

    assert sample(metrics, "cairn_runs_started_total", workflow="metrics.good") == 1
    assert sample(metrics, "cairn_runs_started_total", workflow="metrics.bad") == 1
    finished = "cairn_runs_finished_total"
    assert sample(metrics, finished, workflow="metrics.good", status="completed") == 1
    assert sample(metrics, finished, workflow="metrics.bad", status="failed") == 1
    assert sample(metrics, finished, workflow="metrics.good", status="failed") == 0
    assert sample(metrics, "cairn_step_attempts_total", step="flaky") == 2
    assert sample(metrics, "cairn_step_failures_total", step="flaky") == 1
    assert sample(metrics, "cairn_step_attempts_total", step="doomed") == 1
    assert sample(metrics, "cairn_step_failures_total", step="doomed") == 1
    assert sample(metrics, "cairn_step_duration_seconds_count", step="flaky") == 2
    durations = "cairn_run_duration_seconds_count"
    assert sample(metrics, durations, workflow="metrics.good", status="completed") == 1


async def test_metrics__a_parked_run_is_not_started_again_when_it_wakes(kit: Kit) -> None:
    @kit.step("tick")
    async def tick() -> int:
        return 1

    @kit.workflow("metrics.napper")
    async def napper() -> int:
        await tick()
        await cairn.wait_for_event("go")
        return await tick()

    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        run = await engine.start(napper)
        async with asyncio.timeout(WAIT):
            while (await engine.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.005)
        await engine.send_event(run.run_id, "go")
        assert await run.result(timeout=WAIT) == 1

    assert sample(metrics, "cairn_runs_started_total", workflow="metrics.napper") == 1
    assert sample(metrics, "cairn_step_attempts_total", step="tick") == 2  # none replayed
    # The wake-up was a claim of a due run: its lag is measured.
    assert sample(metrics, "cairn_claim_lag_seconds_count", queue="") == 1


async def test_metrics__gauges_read_runs_per_queue_and_live_workers(kit: Kit) -> None:
    gate = asyncio.Event()

    @kit.step("hold")
    async def hold() -> None:
        await gate.wait()

    @kit.workflow("metrics.sleeper")
    async def sleeper() -> None:
        await cairn.sleep(3600)

    @kit.workflow("metrics.holder")
    async def holder() -> None:
        await hold()

    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        await engine.start(sleeper)
        await engine.start(holder)
        # No worker knows it: PENDING.
        await engine.start("metrics.unknown", queue="mail", allow_unknown=True)

        async with asyncio.timeout(WAIT):
            while True:
                seen = await scrape(metrics)
                if seen.get(("cairn_runs", (("queue", ""), ("status", "sleeping")))) == 1:
                    break
                await asyncio.sleep(0.01)

        assert seen[("cairn_runs", (("queue", ""), ("status", "running")))] == 1
        assert seen[("cairn_runs", (("queue", "mail"), ("status", "pending")))] == 1
        assert seen[("cairn_runs", (("queue", "mail"), ("status", "running")))] == 0
        assert seen[("cairn_workers_live", ())] == 1
        gate.set()
        async with asyncio.timeout(WAIT):
            while (await scrape(metrics))[("cairn_runs", (("queue", ""), ("status", "running")))]:
                await asyncio.sleep(0.01)

    # Closed: the gauges report nothing rather than stale numbers.
    assert not [key for key in await scrape(metrics) if key[0] == "cairn_runs"]


def test_metrics__each_engine_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()

    first.runs_started.labels("w").inc()

    assert sample(first, "cairn_runs_started_total", workflow="w") == 1
    assert sample(second, "cairn_runs_started_total", workflow="w") == 0


async def test_metrics__schedule_lag_is_how_late_each_tick_fired(kit: Kit) -> None:
    @kit.workflow("metrics.ticked")
    async def ticked() -> None:
        pass

    make_schedule(ticked, every="1m", catchup="1h", reg=kit.registry)
    clock = VirtualClock(1_699_999_980.0)  # on a minute boundary
    metrics = Metrics()
    async with kit.engine(metrics=metrics, clock=clock, lease="30d") as engine:
        assert engine.scheduler is not None
        clock.advance(150)  # ticks at +60 s and +120 s are 90 s and 30 s late
        await engine.scheduler.run_due()

    lag = "cairn_schedule_lag_seconds"
    assert sample(metrics, f"{lag}_count", workflow="metrics.ticked") == 2
    assert sample(metrics, f"{lag}_sum", workflow="metrics.ticked") == pytest.approx(120)


async def test_metrics__an_engine_without_workers_still_reads_the_gauges(kit: Kit) -> None:
    metrics = Metrics()
    async with kit.engine(workers=0, metrics=metrics) as engine:
        await engine.start("metrics.elsewhere", allow_unknown=True)
        seen = await scrape(metrics)

    assert seen[("cairn_runs", (("queue", ""), ("status", "pending")))] == 1
    assert seen[("cairn_workers_live", ())] == 0


async def test_metrics__a_scrape_reads_the_gauges_off_the_event_loop(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gauges count every unfinished run. On SQLite, whose reads ran on the loop's
    thread, each scrape stalled the engine's runs for the count (about 200 ms with 50,000
    sleeping runs). The loop must go on while a scrape (ASGI or HTTP thread) counts.
    (PostgreSQL's reads are awaited I/O, so only SQLite is at stake.)"""
    import threading

    from cairn.store.programs import workers as worker_ops

    real = worker_ops.Counts
    loop_ran = threading.Event()
    seen: list[bool] = []

    def slow_counts(*args: object) -> object:
        seen.append(loop_ran.wait(2.0))  # a long count: the loop runs meanwhile, if it can
        return real(*args)  # type: ignore[arg-type]

    kit = Kit(sqlite_url)
    metrics = Metrics()
    async with kit.engine(metrics=metrics, workers=0):
        monkeypatch.setattr(worker_ops, "Counts", slow_counts)
        loop = asyncio.get_running_loop()
        for read in (metrics.counts, lambda: asyncio.to_thread(metrics.read_counts)):
            loop_ran.clear()
            loop.call_later(0.05, loop_ran.set)
            assert await read() is not None
        assert seen == [True, True]


async def test_metrics__a_count_that_times_out_says_so_in_its_log_line(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A frozen database made the line end in an empty reason ("...: "): TimeoutError's
    text is empty. The line must say the read timed out, and after how long."""
    from cairn.observability import metrics as metrics_module

    monkeypatch.setattr(metrics_module, "READ_TIMEOUT", 0.05)
    metrics = Metrics()
    async with kit.engine(metrics=metrics, workers=0) as engine:

        async def frozen(make: object) -> object:
            await asyncio.sleep(3600)  # a database that does not answer

        monkeypatch.setattr(engine.store, "read_aside", frozen)
        with caplog.at_level("WARNING", logger="cairn.metrics"):
            assert await metrics.counts() is None
            assert await asyncio.to_thread(metrics.read_counts) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "cairn.metrics"]
    assert (
        lines == ["metrics: cannot read run counts from the database: no answer within 0.05 s"] * 2
    )
