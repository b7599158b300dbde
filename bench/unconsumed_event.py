"""`python -m bench.unconsumed_event [SECONDS]`: a worker's CPU on a run sent an unawaited event.

For SQLite and PostgreSQL (when reachable), a real worker process (`cairn worker`)
executes a run that waits for event `approval`. Over a fixed wall-clock window (default
10 s) the worker's CPU time is read from /proc/PID/stat, first while the run simply
waits (the idle baseline), then after the run was sent `aproval` (a typo: no wait of the
run takes it). Reported per minute, with how many times the run was claimed in the
window (its fence) and how many lines the worker logged. Last, the right event is sent
and the time until the run completes is reported: the cure must not slow the real wake.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cairn
from bench import postgres

FLOW = """
import cairn


@cairn.workflow(name="bench.approval")
async def approval() -> object:
    return await cairn.wait_for_event("approval")
"""
TICKS = os.sysconf("SC_CLK_TCK")


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def lines(path: Path) -> int:
    with path.open("rb") as log:
        return sum(1 for _ in log)


async def status_of(engine: cairn.Engine, run_id: str, *wanted: str) -> Any:
    """The run's record once its status is one of `wanted` (60 s at most)."""
    async with asyncio.timeout(60):
        while True:
            record = await engine.control.record(run_id)
            if record.status in wanted:
                return record
            await asyncio.sleep(0.02)


async def window(
    engine: cairn.Engine, pid: int, run_id: str, log: Path, seconds: float
) -> dict[str, float]:
    """The worker's CPU seconds, the run's claims and the log's lines over `seconds`."""
    cpu, fence, logged = cpu_seconds(pid), (await engine.control.record(run_id)).fence, lines(log)
    began = time.monotonic()
    await asyncio.sleep(seconds)
    took = time.monotonic() - began
    return {
        "cpu_per_minute": (cpu_seconds(pid) - cpu) / took * 60,
        "claims": (await engine.control.record(run_id)).fence - fence,
        "log_lines": lines(log) - logged,
        "seconds": took,
    }


async def measure(url: str, folder: Path, seconds: float) -> dict[str, Any]:
    (folder / "bench_flow.py").write_text(FLOW)
    log = folder / "worker.log"
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "cairn", "--db", url, "-m", "bench_flow", "worker"]
    async with cairn.Engine(url, workers=0) as engine:
        run = await engine.start("bench.approval", run_id="bench-approval")
        with log.open("wb") as out:
            worker = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            await status_of(engine, run.run_id, "WAITING")
            await asyncio.sleep(1.0)  # let start-up work settle before the baseline
            idle = await window(engine, worker.pid, run.run_id, log, seconds)
            await engine.send_event(run.run_id, "aproval", {"typo": True})
            typo = await window(engine, worker.pid, run.run_id, log, seconds)
            sent = time.monotonic()
            await engine.send_event(run.run_id, "approval", {"ok": True})
            await status_of(engine, run.run_id, "COMPLETED", "FAILED")
            woke = time.monotonic() - sent
        finally:
            worker.terminate()
            worker.wait(30)
    return {"idle": idle, "typo": typo, "real_event_ms": woke * 1000}


def report(label: str, found: dict[str, Any]) -> None:
    for case, title in (("idle", "waiting, nothing sent"), ("typo", "sent 'aproval' (unawaited)")):
        data = found[case]
        print(
            f"{label:<11} {title:<28} {data['cpu_per_minute']:>8.2f} CPU s/min "
            f"{data['claims']:>7.0f} claims {data['log_lines']:>8.0f} log lines "
            f"(over {data['seconds']:.1f} s)"
        )
    print(f"{label:<11} {'then the right event':<28} completed in {found['real_event_ms']:.0f} ms")


async def main(seconds: float) -> None:
    print(f"worker CPU on a run waiting for 'approval', {seconds:g} s windows")
    with tempfile.TemporaryDirectory(prefix="cairn-unconsumed-") as tmp:
        note("SQLite: measuring")
        report("SQLite", await measure(f"sqlite:///{Path(tmp) / 'bench.db'}", Path(tmp), seconds))
    problem = postgres.problem()
    if problem is not None:
        print(f"{'PostgreSQL':<11} skipped: {problem}")
        return
    with postgres.fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        note("PostgreSQL: measuring")
        report("PostgreSQL", await measure(url, Path(tmp), seconds))


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 10.0))
