"""The support agent of examples/support_agent.py killed with SIGKILL at every point.

Each test kills a worker process in one place (inside a tool's step, inside a model
request, while the run waits for a person, inside the refund), answers the approval
from outside, and lets a fresh process finish the ticket. The effect log kept outside
the store proves what happened how often: the model is asked again only for the turn it
was answering at the kill, and the customer is refunded once.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cairn

from .spawned import Spawned, read_only_rows

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("support_worker.py")
DEADLINE = 30.0  # seconds; a healthy machine needs a few (importing pydantic-ai is slow)


class Desk(Spawned):
    """A database, the effect log, the worker processes and the person who approves."""

    def __init__(self, root: Path) -> None:
        super().__init__(deadline=DEADLINE)
        self.db = root / "support.db"
        self.effects = root / "effects.log"
        self.root = root
        self.approved = False

    def spawn(self, hold: str = "") -> subprocess.Popen[str]:
        args = [str(self.db), str(self.effects), *(["--hold", hold] if hold else [])]
        return self.start(SCRIPT, *args, cwd=self.root)

    def lines(self) -> list[dict[str, Any]]:
        if not self.effects.exists():
            return []
        return [json.loads(line) for line in self.effects.read_text().splitlines()]

    def open_task(self) -> bool:
        """Whether the run asks for approval: read from the file, as the test_crash tests do."""
        sql = "SELECT 1 FROM tasks WHERE run_id = 'ticket-1' AND status = 'open'"
        return bool(read_only_rows(self.db, sql))

    def approve(self) -> None:
        with cairn.Client(f"sqlite:///{self.db}") as client:
            (task,) = client.tasks.list(status="open", run_id="ticket-1")
            client.tasks.submit(task.task_id, {"approved": True}, by="ann")
        self.approved = True

    def serve(self, proc: subprocess.Popen[str], until: Callable[[], bool]) -> None:
        """Approve the refund when asked, until `until` holds; fail if `proc` exits first."""
        deadline = time.monotonic() + DEADLINE
        while not until():
            if proc.poll() is not None:
                _, err = proc.communicate()
                pytest.fail(f"worker exited ({proc.returncode}): {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"not done within {DEADLINE}s; effects: {self.lines()}")
            if not self.approved and self.open_task():
                self.approve()
            time.sleep(0.02)  # polling interval, not synchronisation

    def finish(self) -> str:
        """A fresh worker that must recover the ticket and finish it."""
        proc = self.spawn()
        self.serve(proc, lambda: proc.poll() is not None)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err[-2000:]
        reply: str = json.loads(out.strip().splitlines()[-1])["reply"]
        return reply


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    space = Desk(tmp_path)
    yield space
    space.close()


def effect_point(line: dict[str, Any]) -> str:
    detail = [value for key, value in line.items() if key not in ("kind", "pid")]
    return f"{line['kind']}:{detail[0]}"


# Where the first worker is killed, and the effect that happens twice because of it.
POINTS = [
    ("lookup:o-1001", "in the lookup tool's step"),
    ("model:1", "in the model request after the lookup"),
    ("approval", "while the run waits for a person"),
    ("refund:o-1001", "in the refund step"),
    ("model:2", "in the last model request, after the refund"),
]


@pytest.mark.parametrize("point", [p for p, _ in POINTS], ids=[w for _, w in POINTS])
def test_support_agent__survives_kill_9(desk: Desk, point: str) -> None:
    if point == "approval":
        first = desk.spawn()
        deadline = time.monotonic() + DEADLINE
        while not desk.open_task():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    else:
        first = desk.spawn(hold=point)
        desk.serve(first, lambda: point in [effect_point(line) for line in desk.lines()])
    desk.kill(first)

    reply = desk.finish()

    assert reply.startswith("Your refund request: refunded 42.50 (receipt ")
    happened = Counter(effect_point(line) for line in desk.lines())
    expected = Counter(["model:0", "lookup:o-1001", "model:1", "model:2", "refund:o-1001"])
    if point != "approval":
        expected[point] += 1  # in flight at the kill: it ran again; nothing else did
    assert happened == expected
    # The refund ran twice only when killed inside it, and then under one idempotency key.
    keys = {line["key"] for line in desk.lines() if line["kind"] == "refund"}
    assert len(keys) == 1
    assert len({line["pid"] for line in desk.lines()}) == 2
