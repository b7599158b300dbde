"""`python -m bench.observability [RUNS]`: what metrics and tracing add to a step on SQLite.

Ten-step runs one after another (the sequential figure of `python -m bench`), in rounds
that take turns between engines with observability off, metrics only, tracing only,
both, and both with one run in ten sampled, so that drift of the machine falls on each
alike. Tracing goes to an SDK tracer provider with a batch processor whose exporter
drops the spans: the cost of making and handing over spans, not of shipping them.
Beside them, the floor the SDK sets: one bare span started and ended.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

import cairn
from bench.workflows import STEPS, ten_steps
from cairn.observability import Tracing


def _hooks_only() -> Tracing:
    """Tracing whose tracer makes no-op spans: what cairn's own hooks cost, without the SDK."""
    tracing = Tracing()
    tracing.tracer = trace.NoOpTracer()
    return tracing


@functools.cache
def _sampled_provider() -> TracerProvider:
    """A provider like the global one, whose sampler keeps one trace in ten."""
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider


def _one_run_in_ten() -> Tracing:
    """Tracing as a production service samples it: one run in ten recorded."""
    tracing = Tracing()
    tracing.tracer = _sampled_provider().get_tracer("cairn")
    return tracing


CONFIGS: dict[str, Callable[[], dict[str, Any]]] = {
    "off": dict,
    "metrics": lambda: {"metrics": True},
    "tracing": lambda: {"tracing": True},
    "metrics + tracing": lambda: {"metrics": True, "tracing": True},
    "tracing, no-op tracer": lambda: {"tracing": _hooks_only()},
    "metrics + tracing 1/10": lambda: {"metrics": True, "tracing": _one_run_in_ten()},
}
ROUNDS = 7
WARMUP = 30


class Drop(SpanExporter):
    """Takes spans and does nothing with them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


async def one_round(url: str, options: dict[str, Any], runs: int) -> tuple[float, float]:
    """Seconds of `runs` ten-step runs one after another, after a warm-up: (wall, CPU).

    CPU time is of the whole process (the store's thread included): on a busy machine
    it moves less than the wall clock, which also counts waiting for a CPU.
    """
    async with cairn.Engine(url, **options) as engine:
        for i in range(WARMUP):
            await (await engine.start(ten_steps, i)).result()
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(runs):
            if await (await engine.start(ten_steps, i)).result() != i + STEPS:
                raise RuntimeError("a run returned a wrong result")
        return time.perf_counter() - started, time.process_time() - cpu


Found = dict[str, dict[str, list[float]]]  # clock -> configuration -> µs per step by round


async def measure(url: str, runs: int, rounds: int) -> Found:
    """µs per step of each configuration, round by round, by wall clock and CPU time."""
    found: Found = {clock: {name: [] for name in CONFIGS} for clock in ("wall", "cpu")}
    for _ in range(rounds):
        for name, options in CONFIGS.items():
            wall, cpu = await one_round(url, options(), runs)
            found["wall"][name].append(wall / (runs * STEPS) * 1e6)
            found["cpu"][name].append(cpu / (runs * STEPS) * 1e6)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    runs = int(args[0]) if args else 300
    exporter = Drop()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    print(
        f"... {len(CONFIGS)} configurations x {ROUNDS} rounds of {runs} ten-step runs",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix="cairn-bench-obs-") as folder:
        url = f"sqlite:///{Path(folder) / 'obs.db'}"
        found = asyncio.run(measure(url, runs, ROUNDS))
    floor = bare_span_us(provider)
    provider.shutdown()
    print(
        f"per step, {runs} ten-step runs one after another on SQLite (median of {ROUNDS} "
        "rounds; added: median of paired differences with the off round before it)"
    )
    print(table("wall clock", found["wall"]))
    print(table("CPU time", found["cpu"]))
    print(f"spans exported (dropped): {exporter.spans}")
    print(
        "the SDK alone, outside any engine: a span started and ended (the least a traced "
        f"step can cost) {floor:.1f} µs"
    )
    return 0


def bare_span_us(provider: TracerProvider, spans: int = 20000) -> float:
    """µs of one `start_span` + `end` on the SDK, best of three loops: the floor of a step.

    Measured after the engines closed, so that their spans are not in the way, on the
    same provider (its batch processor included).
    """
    tracer = provider.get_tracer("bench")
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(spans):
            tracer.start_span("step").end()
        best = min(best, (time.process_time() - started) / spans * 1e6)
    return best


def table(clock: str, found: dict[str, list[float]]) -> str:
    """Per configuration: µs per step, and what it adds beside "off" in the same cycle.

    The added cost is the median over cycles of (this round - the "off" round just
    before it), which drift of a shared machine between cycles does not skew.
    """
    lines = [f"  {clock}:"]
    for name, values in found.items():
        median = statistics.median(values)
        spread = f"{min(values):.1f}-{max(values):.1f}"
        line = f"    {name:<22} {median:7.1f} µs  (rounds {spread:>11})"
        if name != "off":
            added = statistics.median(v - o for v, o in zip(values, found["off"], strict=True))
            line += f"  added {added:+6.1f} µs"
        lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
