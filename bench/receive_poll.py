"""`python -m bench.receive_poll [SECONDS]`: a worker's CPU on a run polling a quiet mailbox.

For SQLite and PostgreSQL (when reachable), a real worker process (`cairn worker`)
executes a run that loops on `cairn.receive("commands", max_messages=8, timeout=T)` and
never gets a message, for T = 200 ms (the Ignition runtime's `recvCommand` poll) and
T = 5 s, and for T = 200 ms once more in a run whose history already holds 5,000
entries (every wake-up replays the whole history). Over a wall-clock window (default
60 s) the worker's CPU time is read from /proc/PID/stat and reported per minute, with
how many times the run was claimed (its fence), how many history entries it wrote and
how many lines the worker logged. A run parked on a plain wait is the idle baseline.
Last, a "stop" message is sent and the time until the run completes is reported: the
message must wake it at once, not at its next timeout.
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
from bench.unconsumed_event import cpu_seconds, lines, note, status_of

FLOW = """
import cairn


@cairn.workflow(name="bench.poll")
async def poll(timeout: float, history: int) -> int:
    for _ in range(history):  # a run that has polled for a while: a long history
        await cairn.receive("commands", timeout=0)
    calls = 0
    while True:
        calls += 1
        for command in await cairn.receive("commands", max_messages=8, timeout=timeout):
            if command == "stop":
                return calls


@cairn.workflow(name="bench.idle")
async def idle() -> object:
    return await cairn.wait_for_event("never")
"""


async def entries(engine: cairn.Engine, run_id: str) -> int:
    return len(await engine.history(run_id))


async def window(
    engine: cairn.Engine, pid: int, run_id: str, log: Path, seconds: float
) -> dict[str, float]:
    """The worker's CPU seconds, the run's claims and entries, the log's lines."""
    cpu, logged = cpu_seconds(pid), lines(log)
    fence, written = (await engine.control.record(run_id)).fence, await entries(engine, run_id)
    began = time.monotonic()
    await asyncio.sleep(seconds)
    took = time.monotonic() - began
    return {
        "cpu_per_minute": (cpu_seconds(pid) - cpu) / took * 60,
        "claims": (await engine.control.record(run_id)).fence - fence,
        "entries": await entries(engine, run_id) - written,
        "log_lines": lines(log) - logged,
        "seconds": took,
    }


async def measure(
    url: str, folder: Path, seconds: float, timeout: float | None, history: int
) -> dict[str, Any]:
    """One worker, one run: polling with `timeout` after `history` entries, or parked."""
    (folder / "bench_poll_flow.py").write_text(FLOW)
    log = folder / f"worker-{timeout}.log"
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "cairn", "--db", url, "-m", "bench_poll_flow", "worker"]
    async with cairn.Engine(url, workers=0) as engine:
        if timeout is None:
            run = await engine.start("bench.idle", run_id="bench-idle", allow_unknown=True)
        else:
            run_id = f"bench-poll-{timeout:g}-{history}"
            run = await engine.start(
                "bench.poll", timeout, history, run_id=run_id, allow_unknown=True
            )
        with log.open("wb") as out:
            worker = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            await status_of(engine, run.run_id, "WAITING")
            await asyncio.sleep(1.0)  # let start-up work settle
            found = await window(engine, worker.pid, run.run_id, log, seconds)
            if timeout is not None:
                await status_of(engine, run.run_id, "WAITING")  # parked, not mid-replay
                sent = time.monotonic()
                await engine.send_event(run.run_id, "commands", "stop")
                await status_of(engine, run.run_id, "COMPLETED", "FAILED")
                found["stop_ms"] = (time.monotonic() - sent) * 1000
        finally:
            worker.terminate()
            worker.wait(30)
    return found


def report(label: str, case: str, data: dict[str, Any]) -> None:
    stop = f", stopped {data['stop_ms']:.0f} ms after 'stop'" if "stop_ms" in data else ""
    print(
        f"{label:<11} {case:<26} {data['cpu_per_minute']:>6.2f} CPU s/min "
        f"{data['claims']:>5.0f} claims {data['entries']:>5.0f} entries "
        f"{data['log_lines']:>4.0f} log lines (over {data['seconds']:.0f} s){stop}",
        flush=True,
    )


CASES: list[tuple[str, float | None, int]] = [
    ("parked on a plain wait", None, 0),
    ("receive, timeout 200 ms", 0.2, 0),
    ("receive, 200 ms, 5k entries", 0.2, 5000),
    ("receive, timeout 5 s", 5.0, 0),
]


async def store_cases(label: str, url: str, folder: Path, seconds: float) -> None:
    for case, timeout, history in CASES:
        note(f"{label}: {case}")
        report(label, case, await measure(url, folder, seconds, timeout, history))


async def main(seconds: float) -> None:
    print(f"worker CPU on a run polling an empty mailbox, {seconds:g} s windows")
    with tempfile.TemporaryDirectory(prefix="cairn-receive-") as tmp:
        await store_cases("SQLite", f"sqlite:///{Path(tmp) / 'bench.db'}", Path(tmp), seconds)
    problem = postgres.problem()
    if problem is not None:
        print(f"{'PostgreSQL':<11} skipped: {problem}")
        return
    with postgres.fresh_database() as url, tempfile.TemporaryDirectory() as tmp:
        await store_cases("PostgreSQL", url, Path(tmp), seconds)


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0))
