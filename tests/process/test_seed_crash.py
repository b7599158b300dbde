"""kill -9 in the middle of a fluent chain and of a Cloudflare-style entrypoint class.

A fresh process resumes the run; the side-effect file, kept outside the store, proves that
no stage that finished before the kill ran again.
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

SCRIPT = Path(__file__).with_name("seed_flows.py")
DEADLINE = 20.0  # seconds; a healthy machine needs a fraction of one
KEYS = {
    "fluent": ["fetch#1", "charge#1", "Ship#1"],
    "entrypoint": ["charge#1", "fetch#1", "ship#1"],
}


class Space(Spawned):
    """A database, a side-effect file, and the processes running a seed flow on them."""

    def __init__(self, root: Path) -> None:
        super().__init__(deadline=DEADLINE)
        self.root = root
        self.db = root / "seed.db"
        self.effects = root / "effects.txt"

    def spawn(self, kind: str, *extra: str) -> subprocess.Popen[str]:
        args = (str(self.db), str(self.effects), kind, *extra)
        return self.start(SCRIPT, *args, cwd=self.root)

    def counts(self) -> Counter[str]:
        return effect_counts(self.effects)

    def committed(self, key: str) -> bool:
        return bool(read_only_rows(self.db, "SELECT 1 FROM steps WHERE key = ?", (key,)))

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
    made.close()


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
