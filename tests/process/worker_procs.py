"""Worker processes serving served_workflows.py, and what they leave behind.

The test process never executes runs itself: it starts, steers and inspects them through an
engine with no workers, and reads the side-effect file the worker processes write.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.store.records import RunRecord

from .spawned import Spawned, effect_counts, effect_lines, effect_pids

SCRIPT = Path(__file__).with_name("served_workflows.py")
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one


class Workers(Spawned):
    """Worker processes on one database, and the side-effect file they share."""

    def __init__(self, root: Path, url: str) -> None:
        super().__init__(deadline=DEADLINE)
        self.url = url
        self.effects = root / "effects.txt"
        self.release_file = root / "release"

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        """Start a worker process (it prints "ready" once its engine is open)."""
        return self.start(SCRIPT, self.url, str(self.effects), *extra, cwd=self.effects.parent)

    def release(self) -> None:
        """Let held steps finish."""
        self.release_file.touch()

    def lines(self) -> list[str]:
        return effect_lines(self.effects)

    def counts(self) -> Counter[str]:
        """How often each side effect happened."""
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
            for proc in self.procs:
                if proc.poll() is not None and proc.returncode != -9:
                    _, err = proc.communicate()
                    pytest.fail(f"worker exited ({proc.returncode}) before {what}: {err[-2000:]}")
            if time.monotonic() > deadline:
                self.stuck(f"no {what} within {DEADLINE}s")
            await asyncio.sleep(0.005)  # polling interval, not synchronisation

    async def status(self, control: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
        """The stored run once its status is one of `statuses`."""

        async def reached() -> RunRecord | None:
            run = await control.control.record(run_id)
            return run if run.status in statuses else None

        record: RunRecord = await self.until(f"run {run_id} {'/'.join(statuses)}", reached)
        return record


@asynccontextmanager
async def workers(root: Path, url: str) -> AsyncIterator[tuple[Workers, cairn.Engine]]:
    """Worker processes on `url`, and an engine that only steers and inspects runs."""
    procs = Workers(root, url)
    try:
        async with cairn.Engine(url, workers=0) as control:
            yield procs, control
    finally:
        procs.close()
