"""kill -9 around a `schedule_workflow` call that the workflow does not await.

Killed after the scheduled run was created but before its start was journaled (while the
step after the call committed), or after both: a fresh process recovers the parent and
finds the same scheduled run (its id is derived from the parent's), which then runs once
at its time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("scheduled_flow.py")
SRC = Path(cairn.__file__).resolve().parents[1]
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one
SCHEDULED = "sched-parent/schedule:sched.annual_review#1"


class Space:
    """A database, a side-effect file, and the processes running the flow on them."""

    def __init__(self, root: Path) -> None:
        self.db = root / "sched.db"
        self.effects = root / "effects.txt"
        self.root = root
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
        )
        env.pop("CAIRN_DATABASE_URL", None)
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(self.db), str(self.effects), *extra],
            cwd=self.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        except sqlite3.OperationalError:
            return []
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:  # tables not created yet
            return []
        finally:
            conn.close()

    def scheduled_runs(self) -> list[tuple[object, ...]]:
        return self.rows("SELECT run_id, status FROM runs WHERE workflow = 'sched.annual_review'")

    def committed(self, step: str) -> bool:
        return bool(self.rows(f"SELECT 1 FROM steps WHERE name = 'sched.{step}'"))

    def start_journaled(self) -> bool:
        return bool(self.rows("SELECT 1 FROM steps WHERE kind = 'schedule'"))

    def wait_for(self, proc: subprocess.Popen[str], what: str, ready: object) -> None:
        """Poll `ready` until it holds; fail if the process exits or the deadline passes."""
        assert callable(ready)
        deadline = time.monotonic() + DEADLINE
        while not ready():
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"process exited ({proc.returncode}) before {what}: {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {DEADLINE}s")
            time.sleep(0.002)  # polling interval, not synchronisation

    def kill(self, proc: subprocess.Popen[str]) -> None:
        proc.kill()  # SIGKILL: no cleanup, no atexit, no finally
        proc.communicate(timeout=10)
        assert proc.returncode == -9

    def counts(self) -> Counter[str]:
        if not self.effects.exists():
            return Counter()
        lines = self.effects.read_text(encoding="utf-8").splitlines()
        return Counter(line.rsplit(" pid=", 1)[0] for line in lines)


@pytest.fixture
def space(tmp_path: Path) -> Iterator[Space]:
    made = Space(tmp_path)
    yield made
    for proc in made.procs:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.communicate(timeout=10)


@pytest.mark.parametrize("hold", ["unrecorded", "recorded"])
def test_scheduled_crash__killed_around_the_start_finds_the_same_run(
    space: Space, hold: str
) -> None:
    first = space.spawn("--hold", hold)
    space.wait_for(first, "the scheduled run", lambda: space.scheduled_runs())
    # The step after the call committed without waiting for the start to be journaled.
    space.wait_for(first, "the step after the call", lambda: space.committed("close_books"))
    if hold == "recorded":
        space.wait_for(first, "the start's journal entry", space.start_journaled)
    assert space.scheduled_runs() == [(SCHEDULED, "PENDING")]
    assert space.start_journaled() is (hold == "recorded")
    space.kill(first)

    resumed = space.spawn()
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report == {
        "result": "scheduled",
        "review": "reviewed 2026",
        "scheduled": SCHEDULED,
        "runs": [SCHEDULED],
    }
    # The replay met the start where the history lacks it, after a step it has: it
    # found the same run, and neither the step nor the scheduled run ran twice.
    assert space.counts() == {"books 2026": 1, "review 2026": 1}
