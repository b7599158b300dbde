"""The Ignition seed's loop workflow, imports changed, on `cairn worker`: kill -9 mid-loop.

A sync workflow (run in a thread) loops over `sleep_chunked` and a step that leaves a mark
in a file outside the store. The worker running it is killed with SIGKILL; a second worker
takes the run over once its lease lapses and finishes it, and no mark committed before the
kill is made again. On both stores.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from .test_cli import TIMEOUT, Worker, cairn_cmd
from .test_cli import workers as workers  # the fixture

pytestmark = pytest.mark.process

FLOWS = """
import os

from cairn.compat.ignition import getWorkflows, step, workflow
from cairn.steps.sleep import sleep_chunked

MARKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "marks.txt")


@step(name="loop.mark", options={"retries_allowed": True, "max_attempts": 3})
def mark(i):
    with open(MARKS, "a") as out:
        out.write(f"{i}\\n")
        out.flush()
        os.fsync(out.fileno())
    return i


@workflow(name="demo.marks")
def demo_marks(duration_s=3):
    rt = getWorkflows()
    loops = int(duration_s * 2)
    for i in range(loops):
        rt.checkCancelled()
        rt.progress("loop %s/%s" % (i + 1, loops))
        mark(i + 1)
        sleep_chunked(total_ms=500, chunk_ms=250)
    return {"ok": True, "loops": loops}
"""


def marks(project: Path) -> Counter[int]:
    path = project / "marks.txt"
    text = path.read_text() if path.exists() else ""
    return Counter(int(line) for line in text.split())


def test_ignition_loop__killed_worker_is_taken_over(tmp_path: Path, store_url: str, workers):
    (tmp_path / "flows.py").write_text(FLOWS)
    db = ["--db", store_url]
    enqueued = cairn_cmd(tmp_path, "run", "demo.marks", "--enqueue", "-m", "flows", *db)
    assert enqueued.returncode == 0, enqueued.stderr
    run_id = enqueued.stdout.strip()

    first = Worker(tmp_path, *db, "--lease", "2s")
    workers.append(first)
    first.wait_for(f"run {run_id} (demo.marks) started, attempt 1")
    deadline = time.monotonic() + TIMEOUT
    while marks(tmp_path)[3] == 0:  # the third loop's step ran: two are committed
        assert time.monotonic() < deadline, "the loop did not reach its third step"
        time.sleep(0.05)
    first.proc.kill()
    first.proc.wait(timeout=TIMEOUT)

    second = Worker(tmp_path, *db, "--lease", "2s")
    workers.append(second)
    second.wait_for(f"run {run_id} COMPLETED")
    second.terminate()

    shown = cairn_cmd(tmp_path, "runs", "show", run_id, "--json", *db)
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)["run"]
    assert run["result"] == {"ok": True, "loops": 6}
    assert run["recoveries"] == 1
    seen = marks(tmp_path)
    assert sorted(seen) == [1, 2, 3, 4, 5, 6]
    assert seen[1] == seen[2] == 1  # committed before the kill: never again
    assert all(seen[i] == 1 for i in (4, 5, 6))
