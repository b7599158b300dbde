"""`cairn run --wait` on a run with a step on a step queue, with a real worker process.

It used to stop at the step ("WAITING for a worker of step queue ...") even with a live
worker of that queue running, so the operator saw the run parked while it completed
elsewhere a moment later. Now it waits while a live worker serves the queue and goes on
with the run here once the step is reported; with none, it says which worker to start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli import Worker, cairn_cmd, workers  # noqa: F401

pytestmark = pytest.mark.process

FLOWS = """
import cairn


@cairn.step()
async def prepare(n: int) -> int:
    return n + 1


@cairn.step(queue="gpu")
async def train(n: int) -> int:
    return n * 10


@cairn.workflow(name="flows.pipeline")
async def pipeline(n: int) -> int:
    return await train(await prepare(n))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def test_run_wait__waits_for_a_live_step_queue_worker_and_finishes_here(
    project: Path,
    store_url: str,
    workers: list[Worker],  # noqa: F811
) -> None:
    db = ["--db", store_url]
    # Serves step queue "gpu" and the runs of workflow queue "gpu" only: the run itself
    # can go on only in `cairn run`.
    worker = Worker(project, "--queue", "gpu", *db)
    workers.append(worker)
    worker.wait_for("ready")
    proc = cairn_cmd(project, "run", "flows:pipeline", "4", "--wait", "--run-id", "p1", *db)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 50
    assert (
        "run p1 is WAITING for a worker of step queue 'gpu' to run step 'train'; a live "
        "worker serves it: waiting here for it" in proc.stderr
    )
    assert "run p1 COMPLETED" in proc.stderr
    shown = json.loads(cairn_cmd(project, "runs", "show", "p1", "--json", *db).stdout)
    remote = [e for e in shown["history"] if e["kind"] == "remote"]
    assert len(remote) == 1 and remote[0]["status"] == "completed"


def test_run_wait__with_no_worker_of_the_step_queue_says_which_to_start(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    proc = cairn_cmd(project, "run", "flows:pipeline", "4", "--wait", "--run-id", "p2", *db)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    last = proc.stderr.splitlines()[-1]
    # The worker it names imports the step's module (without -m it failed the attempt:
    # "step 'train' is not registered on worker ...").
    assert last.startswith("run p2 is WAITING for a worker of step queue 'gpu' to run step")
    assert "(`cairn worker --db " in last and " -m flows --step-queue gpu`;" in last
