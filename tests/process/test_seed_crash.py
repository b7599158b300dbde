"""kill -9 in the middle of a fluent chain and of a Cloudflare-style entrypoint class.

A fresh process resumes the run; the side-effect file, kept outside the store, proves that
no stage that finished before the kill ran again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cairn

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("seed_flows.py")
SRC = Path(cairn.__file__).resolve().parents[1]
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one
KEYS = {
    "fluent": ["fetch#1", "charge#1", "Ship#1"],
    "entrypoint": ["charge#1", "fetch#1", "ship#1"],
}


class Space:
    """A database, a side-effect file, and the processes running a seed flow on them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "seed.db"
        self.effects = root / "effects.txt"
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, kind: str, *extra: str) -> subprocess.Popen[str]:
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
        )
        env.pop("CAIRN_DATABASE_URL", None)
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(self.db), str(self.effects), kind, *extra],
            cwd=self.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def wait_for(self, proc: subprocess.Popen[str], what: str, ready: Callable[[], bool]) -> None:
        """Poll `ready` until it holds; fail if the process exits or the deadline passes."""
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

    def committed(self, key: str) -> bool:
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        except sqlite3.OperationalError:
            return False
        try:
            return bool(conn.execute("SELECT 1 FROM steps WHERE key = ?", (key,)).fetchall())
        except sqlite3.OperationalError:  # tables not created yet
            return False
        finally:
            conn.close()

    def resume(self, kind: str) -> dict[str, object]:
        """A fresh process on the same database recovers the run and finishes it."""
        proc = self.spawn(kind)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
        report: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return report


@pytest.fixture
def space(tmp_path: Path) -> Iterator[Space]:
    made = Space(tmp_path)
    yield made
    for proc in made.procs:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.communicate(timeout=10)


@pytest.mark.parametrize("kind", ["fluent", "entrypoint"])
def test_seed_crash__killed_inside_a_stage(space: Space, kind: str) -> None:
    first = space.spawn(kind, "--hold", "in:2")
    space.wait_for(first, "stage 2's side effect", lambda: f"{kind} stage 2" in space.counts())
    assert space.committed("fetch#1") and not space.committed("charge#1")
    space.kill(first)

    report = space.resume(kind)
    assert report["result"] == "o>1>2>3"
    assert sorted(report["keys"]) == sorted(KEYS[kind])  # type: ignore[arg-type]
    # Stage 1 finished before the kill and did not run again; stage 2 was cut off inside,
    # so it ran again (at least once is all a step killed mid-way can promise).
    assert space.counts() == {f"{kind} stage 1": 1, f"{kind} stage 2": 2, f"{kind} stage 3": 1}


@pytest.mark.parametrize("kind", ["fluent", "entrypoint"])
def test_seed_crash__killed_between_stages(space: Space, kind: str) -> None:
    first = space.spawn(kind, "--hold", "after:2")
    space.wait_for(first, "stage 2's commit", lambda: space.committed("charge#1"))
    space.kill(first)

    report = space.resume(kind)
    assert report["result"] == "o>1>2>3"
    assert space.counts() == {f"{kind} stage 1": 1, f"{kind} stage 2": 1, f"{kind} stage 3": 1}
