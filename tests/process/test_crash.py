"""Real processes killed with SIGKILL mid-run, and fresh processes that finish their runs.

The side-effect file written by every step (crash_workflow.py) is the counter kept outside
the store: a step that completed before the kill must appear in it exactly once.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .spawned import Spawned, effect_counts, effect_lines, read_only_rows

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("crash_workflow.py")
STEPS = 10
EXPECTED = sum(i * i for i in range(1, STEPS + 1))
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one


class Workspace(Spawned):
    """A database, a side-effect file, and the processes running the workflow on them."""

    def __init__(self, root: Path) -> None:
        super().__init__(deadline=DEADLINE)
        self.root = root
        self.db = root / "crash.db"
        self.effects = root / "effects.txt"

    def spawn(self, *extra: str) -> subprocess.Popen[str]:
        return self.start(SCRIPT, str(self.db), str(self.effects), *extra, cwd=self.root)

    def finish(self, proc: subprocess.Popen[str]) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=60)
        return proc.returncode, out, err

    def lines(self) -> list[str]:
        return effect_lines(self.effects)

    def counts(self) -> Counter[str]:
        return effect_counts(self.effects)

    def query(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Read the database as it is on disk (read-only; empty until it exists)."""
        return read_only_rows(self.db, sql, params)

    def committed(self, key: str) -> bool:
        return bool(self.query("SELECT 1 FROM steps WHERE key = ?", key))

    def failed_attempts(self, key: str) -> list[tuple[object, ...]]:
        return self.query("SELECT attempt, retry_at FROM step_attempts WHERE key = ?", key)

    def dump(self) -> list[str]:
        """The database as SQL, but for when workers were last seen (each start refreshes it)."""
        conn = sqlite3.connect(self.db)
        try:
            return [
                line
                for line in conn.iterdump()
                if not line.startswith('INSERT INTO "known_workflows"')
            ]
        finally:
            conn.close()


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    space = Workspace(tmp_path)
    yield space
    space.close()


def _resume(ws: Workspace) -> tuple[dict[str, float], float]:
    """Start a fresh process on the same database; it must recover and finish the run."""
    started = time.monotonic()
    code, out, err = ws.finish(ws.spawn())
    elapsed = time.monotonic() - started
    assert code == 0, err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["result"] == EXPECTED
    return report, elapsed


def test_crash__inside_a_step_before_its_commit(ws: Workspace) -> None:
    first = ws.spawn("--crash", "before:5")
    ws.wait_for(first, "step 5's side effect", lambda: "work 5" in ws.counts())
    ws.kill(first)
    assert not ws.committed("work#5") and ws.committed("work#4")

    _resume(ws)
    expected = Counter({f"work {i}": 1 for i in range(1, STEPS + 1)})
    expected["work 5"] = 2  # in flight at the kill: it ran again; nothing else did
    assert ws.counts() == expected
    assert _pids(ws, "work 5") == 2


def test_crash__right_after_a_steps_commit(ws: Workspace) -> None:
    first = ws.spawn("--crash", "after:5")
    ws.wait_for(first, "step 5's commit", lambda: ws.committed("work#5"))
    ws.kill(first)
    assert "work 6" not in ws.counts()

    _resume(ws)
    assert ws.counts() == Counter({f"work {i}": 1 for i in range(1, STEPS + 1)})
    assert _pids(ws, "work 5") == 1 and _pids(ws, "work 6") == 1
    assert _pids_of(ws, [f"work {i}" for i in range(1, 6)]) != _pids_of(ws, ["work 6"])


def test_crash__during_a_retry_backoff(ws: Workspace) -> None:
    first = ws.spawn("--crash", "backoff:7")
    ws.wait_for(first, "step 7's failed attempt", lambda: bool(ws.failed_attempts("work#7")))
    ws.kill(first)
    # Killed inside the one-second backoff: the second attempt never started here.
    assert ws.counts()["work 7 failed"] == 1 and not ws.committed("work#7")
    [(attempt, retry_at)] = ws.failed_attempts("work#7")
    assert attempt == 1 and isinstance(retry_at, float)

    _resume(ws)
    expected = Counter({f"work {i}": 1 for i in range(1, STEPS + 1)})
    expected["work 7 failed"] = 1
    assert ws.counts() == expected
    [(attempts, finished_at)] = ws.query(
        "SELECT attempts, finished_at FROM steps WHERE key = 'work#7'"
    )
    assert attempts == 2
    assert isinstance(finished_at, float) and finished_at >= retry_at  # the backoff was kept


def test_crash__recovered_promptly_after_a_fresh_process_starts(ws: Workspace) -> None:
    first = ws.spawn("--crash", "before:3")
    ws.wait_for(first, "step 3's side effect", lambda: "work 3" in ws.counts())
    ws.kill(first)

    report, elapsed = _resume(ws)
    print(
        f"\nrecovery: the fresh process finished the killed run {elapsed:.3f}s after it was "
        f"spawned; inside it, from the script's first line: cairn imported at "
        f"{report['imported']:.3f}s, engine open (run recovered) at {report['opened']:.3f}s, "
        f"run completed at {report['done']:.3f}s"
    )
    # Loose on purpose: the point is that nobody waited for the 30s lease to expire.
    assert elapsed < 10


def test_bad_input__database_unchanged_and_usable(ws: Workspace) -> None:
    _resume(ws)  # a completed run in the database
    before = ws.dump()

    code, out, err = ws.finish(ws.spawn("--bad-input"))
    assert code == 1, err[-2000:]
    errors = out.strip().splitlines()
    culprits = [
        ("'crash.ten_steps'", "object"),
        ("start delay", "'soon'"),
        ("run_id", "''"),
        ("'crash.ten_steps'", "function"),
        ("run status", "'bogus'"),
        ("cursor", "'not-a-cursor'"),
        ("'missing-run'", "not found"),
        ("'missing-run'", "not found"),
    ]
    assert len(errors) == len(culprits), out
    for line, names in zip(errors, culprits, strict=True):
        assert line.startswith("error: ") and all(n in line for n in names), line
    assert ws.dump() == before

    code, out, err = ws.finish(ws.spawn("--run-id", "after-bad-input"))
    assert code == 0, err[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["result"] == EXPECTED
    assert sorted(r[0] for r in ws.query("SELECT run_id FROM runs")) == [
        "after-bad-input",
        "crash-run",
    ]


def _pids(ws: Workspace, effect: str) -> int:
    return len(_pids_of(ws, [effect]))


def _pids_of(ws: Workspace, effects: list[str]) -> set[str]:
    return {
        line.rsplit(" pid=", 1)[1] for line in ws.lines() if line.rsplit(" pid=", 1)[0] in effects
    }
