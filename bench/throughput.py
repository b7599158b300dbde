"""Ten-step workflows through a real Engine: one after another, and many at once."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import cairn
from bench.workflows import STEPS, ten_steps


@dataclass(frozen=True)
class Sequential:
    runs: int
    seconds: float  # the median round
    rounds: list[float]
    raw_rounds: list[float]  # µs of a raw commit measured just before each round

    @property
    def raw_us(self) -> float:
        return statistics.median(self.raw_rounds)

    @property
    def ratio(self) -> float:
        """The median over rounds of (µs per step / raw commit µs measured beside it).

        Commit latency drifts by tens of percent within minutes on a shared machine, so
        each round is compared with the floor measured right before it.
        """
        step = 1e6 / (self.runs * STEPS)
        return statistics.median(
            seconds * step / raw for seconds, raw in zip(self.rounds, self.raw_rounds, strict=True)
        )

    @property
    def us_per_step(self) -> float:
        return self.seconds / (self.runs * STEPS) * 1e6

    @property
    def us_per_run(self) -> float:
        return self.seconds / self.runs * 1e6


@dataclass(frozen=True)
class Concurrent:
    runs: int
    seconds: float  # the median round
    workers: int
    rounds: list[float]
    raw_rounds: list[float]  # µs of a raw commit measured just before each round

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def us_per_step(self) -> float:
        """Wall time per step of the median round (its seconds over runs x 10 steps)."""
        return self.seconds / (self.runs * STEPS) * 1e6

    @property
    def ratio(self) -> float:
        """The median over rounds of (µs per step / raw commit µs measured beside it).

        Steps of runs side by side share commits, so this can be below 1.
        """
        step = 1e6 / (self.runs * STEPS)
        return statistics.median(
            seconds * step / raw for seconds, raw in zip(self.rounds, self.raw_rounds, strict=True)
        )


async def sequential(
    url: str,
    raw_commit_us: Callable[[], float],
    *,
    runs: int = 300,
    rounds: int = 3,
    warmup: int = 30,
) -> Sequential:
    """Start each run and await its result before starting the next, `rounds` times.

    `raw_commit_us` measures the raw commit floor; it runs before every round.
    """
    times = []
    raws = []
    async with cairn.Engine(url) as engine:
        for i in range(warmup):
            await (await engine.start(ten_steps, i)).result()
        for _ in range(rounds):
            raws.append(await asyncio.to_thread(raw_commit_us))
            started = time.perf_counter()
            for i in range(runs):
                run = await engine.start(ten_steps, i)
                if await run.result() != i + STEPS:
                    raise RuntimeError(f"run {run.run_id} returned a wrong result")
            times.append(time.perf_counter() - started)
    return Sequential(runs, statistics.median(times), times, raws)


async def concurrent(
    url: str,
    raw_commit_us: Callable[[], float],
    *,
    runs: int = 200,
    rounds: int = 5,
    warmup: int = 50,
) -> Concurrent:
    """Start `runs` runs at once (one engine, a slot for each) and await them all.

    `raw_commit_us` measures the raw commit floor; it runs before every round.
    """
    times = []
    raws = []
    async with cairn.Engine(url, workers=runs) as engine:
        await _batch(engine, warmup)
        for _ in range(rounds):
            raws.append(await asyncio.to_thread(raw_commit_us))
            started = time.perf_counter()
            await _batch(engine, runs)
            times.append(time.perf_counter() - started)
    return Concurrent(runs, statistics.median(times), runs, times, raws)


async def _batch(engine: cairn.Engine, runs: int) -> None:
    handles = await asyncio.gather(*(engine.start(ten_steps, i) for i in range(runs)))
    results = await asyncio.gather(*(run.result() for run in handles))
    if results != [i + STEPS for i in range(runs)]:
        raise RuntimeError("a concurrent run returned a wrong result")


async def streams(url: str, *, callers: int = 4, runs: int = 100, rounds: int = 3) -> float:
    """Runs per second (median round) of `callers` that each start a run and await it, then
    the next: a few runs in flight at a time, as a lightly loaded service has."""

    async def caller(engine: cairn.Engine, count: int) -> None:
        for i in range(count):
            if await (await engine.start(ten_steps, i)).result() != i + STEPS:
                raise RuntimeError("a run returned a wrong result")

    rates = []
    async with cairn.Engine(url, workers=max(16, callers)) as engine:
        await asyncio.gather(*(caller(engine, 5) for _ in range(callers)))
        for _ in range(rounds):
            started = time.perf_counter()
            await asyncio.gather(*(caller(engine, runs) for _ in range(callers)))
            rates.append(callers * runs / (time.perf_counter() - started))
    return statistics.median(rates)
