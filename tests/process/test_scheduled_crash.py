"""kill -9 around a `schedule_workflow` call that the workflow does not await.

Killed after the scheduled run was created but before its start was journaled (while the
step after the call committed), or after both: a fresh process recovers the parent and
finds the same scheduled run (its id is derived from the parent's), which then runs once
at its time.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .spawned import Spawned, effect_counts, read_only_rows

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("scheduled_flow.py")
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one
SCHEDULED = "sched-parent/schedule:sched.annual_review#1"


class Space(Spawned):
    """A database, a side-effect file, and the processes running the flow on them."""

    def __init__(self, root: Path) -> None:
        super().__init__(deadline=DEADLINE)
        self.db = root / "sched.db"
        self.effects = root / "effects.txt"
        self.root = root

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        return self.start(SCRIPT, str(self.db), str(self.effects), *extra, cwd=self.root)

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        return read_only_rows(self.db, sql)

    def scheduled_runs(self) -> list[tuple[object, ...]]:
        return self.rows("SELECT run_id, status FROM runs WHERE workflow = 'sched.annual_review'")

    def committed(self, step: str) -> bool:
        return bool(self.rows(f"SELECT 1 FROM steps WHERE name = 'sched.{step}'"))

    def start_journaled(self) -> bool:
        return bool(self.rows("SELECT 1 FROM steps WHERE kind = 'schedule'"))

    def counts(self) -> Counter[str]:
        return effect_counts(self.effects)


@pytest.fixture
def space(tmp_path: Path) -> Iterator[Space]:
    made = Space(tmp_path)
    yield made
    made.close()


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
