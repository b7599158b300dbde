"""`cairn worker` processes serving child_flows.py, and what they leave behind.

The test process never executes runs itself: it starts, steers and inspects them through an
engine with no workers, and reads the side-effect file the workers write.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.store.records import RunRecord

from .spawned import effect_counts, effect_lines, effect_pids

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0  # seconds; a healthy machine needs a fraction of one


class Worker:
    """One `cairn worker` process; its log says its id once it is ready."""

    def __init__(self, url: str, effects: Path, log: Path, *args: str) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
            "KIDS_EFFECTS": str(effects),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        }
        self.log = log
        self._out = log.open("w")
        command = [sys.executable, "-m", "cairn", "worker", "--db", url]
        command += ["-m", "tests.process.child_flows", "--lease", "2s", *args]
        self.proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=self._out, cwd=log.parent
        )
        self.id = ""

    @property
    def pid(self) -> str:
        return str(self.proc.pid)

    def ready(self) -> bool:
        for line in self.log.read_text().splitlines():
            if " ready" in line and "worker " in line:
                self.id = line.split("worker ", 1)[1].split()[0]
                return True
        return False

    def kill(self) -> None:
        """SIGKILL: no cleanup, no atexit, no finally."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._out.close()


class Kids:
    """Worker processes on one database, and the side-effect file they share."""

    def __init__(self, root: Path, url: str) -> None:
        self.root = root
        self.url = url
        self.effects = root / "effects.txt"
        self.workers: list[Worker] = []

    async def spawn(self, *args: str) -> Worker:
        """A worker process, once it is ready."""
        log = self.root / f"worker-{len(self.workers) + 1}.log"
        worker = Worker(self.url, self.effects, log, *args)
        self.workers.append(worker)
        await self.until("a ready worker", worker.ready)
        return worker

    def release(self, *names: str) -> None:
        """Let the held steps of children `names` finish."""
        for name in names:
            (self.root / f"release-{name}").touch()

    def lines(self) -> list[str]:
        return effect_lines(self.effects)

    def counts(self) -> Counter[str]:
        """How often each side effect happened ("a start", "parent cleanup")."""
        return effect_counts(self.effects)

    def pids(self, effect: str) -> set[str]:
        """The processes that produced `effect`."""
        return effect_pids(self.effects, effect)

    async def until(self, what: str, ready: Callable[[], Any]) -> Any:
        """Poll `ready` (sync or async) until truthy; fail if a worker dies or time runs out."""
        deadline = time.monotonic() + DEADLINE
        while True:
            value = ready()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            for worker in self.workers:
                if worker.proc.poll() not in (None, -9):
                    pytest.fail(f"worker exited before {what}: {worker.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                logs = "\n".join(w.log.read_text()[-1500:] for w in self.workers)
                pytest.fail(f"no {what} within {DEADLINE}s; effects {self.counts()}\n{logs}")
            await asyncio.sleep(0.01)  # polling interval, not synchronisation

    async def held(self, *names: str) -> None:
        """Wait until the held step of each child `names` runs."""
        await self.until(
            f"held {', '.join(names)}", lambda: all(self.counts()[f"{n} held"] for n in names)
        )

    async def status(self, control: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
        """The stored run once its status is one of `statuses`."""

        async def reached() -> RunRecord | None:
            run = await control.control.record(run_id)
            return run if run.status in statuses else None

        record: RunRecord = await self.until(f"run {run_id} {'/'.join(statuses)}", reached)
        return record

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


@asynccontextmanager
async def kids(root: Path, url: str) -> AsyncIterator[tuple[Kids, cairn.Engine]]:
    """Worker processes on `url`, and an engine that only steers and inspects runs."""
    procs = Kids(root, url)
    try:
        async with cairn.Engine(url, workers=0) as control:
            yield procs, control
    finally:
        procs.close()


def child_id(parent: str, workflow: str = "kids.child", n: int = 1) -> str:
    """The id of a parent's `n`th child of `workflow`."""
    return f"{parent}/{workflow}#{n}"


def run_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`cairn ARGS --db URL`, as an operator types it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    return subprocess.run(
        [sys.executable, "-m", "cairn", *args, "--db", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
