"""Crash recovery, measured with real processes.

A first process starts a ten-step run and is killed with SIGKILL while its sixth step
hangs. A fresh process then opens an Engine on the same database, which recovers the run;
we time that process from its start (interpreter and imports included) and from `Engine`
open to the run's completion.

`python -m bench.crash start URL RUN_ID MARKER` and `... recover URL RUN_ID REPORT` are the
two child processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import cairn
from bench.workflows import crashy

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Recovery:
    from_process_start: list[float]
    from_engine_open: list[float]

    @property
    def process_median(self) -> float:
        return statistics.median(self.from_process_start)

    @property
    def engine_median(self) -> float:
        return statistics.median(self.from_engine_open)


def _child(*args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_DATABASE_URL", "CAIRN_MODULES")}
    return subprocess.Popen(
        [sys.executable, "-m", "bench.crash", *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )


def measure(url: str, folder: Path, *, trials: int = 3) -> Recovery:
    """Kill a run mid-step `trials` times and time the fresh process that finishes it."""
    from_start: list[float] = []
    from_open: list[float] = []
    for trial in range(trials):
        run_id = f"crash-{uuid.uuid4().hex[:12]}-{trial}"
        marker = folder / f"{run_id}.hanging"
        report = folder / f"{run_id}.json"
        first = _child("start", url, run_id, str(marker))
        deadline = time.monotonic() + 30
        while not marker.exists():  # synchronise on the hanging step's marker file
            if first.poll() is not None or time.monotonic() > deadline:
                first.kill()
                raise RuntimeError(f"crash child {first.pid} never reached the hanging step")
            time.sleep(0.002)
        first.send_signal(signal.SIGKILL)
        first.wait()
        spawned_at = time.time()
        second = _child("recover", url, run_id, str(report))
        if second.wait(timeout=60) != 0:
            raise RuntimeError(f"recovery process exited with status {second.returncode}")
        timing = json.loads(report.read_text())
        from_start.append(timing["done"] - spawned_at)
        from_open.append(timing["done"] - timing["opening"])
    return Recovery(from_start, from_open)


async def _start(url: str, run_id: str, marker: str) -> None:
    async with cairn.Engine(url) as engine:
        run = await engine.start(crashy, 0, marker, run_id=run_id)
        await run.result()
    raise SystemExit("the hanging step was expected to be killed")


async def _recover(url: str, run_id: str, report: str) -> None:
    opening = time.time()
    async with cairn.Engine(url) as engine:
        result = await (await engine.get(run_id)).result(timeout=30)
        done = time.time()
    if result != 10:
        raise SystemExit(f"recovered run {run_id} returned {result!r}")
    Path(report).write_text(json.dumps({"opening": opening, "done": done}))


def main(argv: list[str]) -> None:
    command, url, run_id, path = argv
    if command == "start":
        asyncio.run(_start(url, run_id, path))
    elif command == "recover":
        asyncio.run(_recover(url, run_id, path))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
