"""`cairn run --wait` and `cairn workflows run` through a run's sleeps; what `cairn run` says
when it stops at one. Real subprocesses, on both stores."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from .test_cli import TIMEOUT, _env, cairn_cmd, one_error_line

pytestmark = pytest.mark.process

FLOWS = """
import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.workflow(name="naps.twice")
async def twice(a: int) -> int:
    first = await add(a, 1)
    await cairn.sleep("300ms")
    second = await add(first, 1)
    await cairn.sleep("300ms", name="again")
    return await add(second, 1)


@cairn.workflow(name="naps.grandchild")
async def grandchild(a: int) -> int:
    await cairn.sleep("300ms")
    return await add(a, 100)


@cairn.workflow(name="naps.child")
async def child(a: int) -> int:
    return await grandchild(await add(a, 10))


@cairn.workflow(name="naps.family")
async def family(a: int) -> list[int]:
    return [await child(a), await child(a + 1)]


@cairn.workflow(name="naps.rounds")
async def rounds(n: int) -> int:
    total = await add(n, 1)
    if n == 1:
        await cairn.sleep("200ms")  # the chain's second run sleeps, then goes on as new
    if n < 2:
        cairn.continue_as_new(n + 1)
    return total


@cairn.workflow(name="naps.outside")
async def outside() -> None:
    await cairn.wait_for_event("never")


@cairn.workflow(name="naps.waits_outside")
async def waits_outside() -> None:
    await outside()


@cairn.workflow(name="naps.limited", queue=cairn.Queue("limited", rate="1/1s"))
async def limited(a: int) -> int:
    return await add(a, 1)


@cairn.workflow(name="naps.limits")
async def limits() -> list[int]:
    handles = [await cairn.start_child(limited, a) for a in (1, 2)]
    return [await handle.result() for handle in handles]


@cairn.step(queue="gpu")
async def train(a: int) -> int:
    return a * 2


@cairn.workflow(name="naps.trained")
async def trained(a: int) -> int:
    return await train(a)


@cairn.workflow(name="naps.trains")
async def trains(a: int) -> int:
    return await trained(a) + 1
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "naps.py").write_text(FLOWS)
    return tmp_path


def status(project: Path, url: str, run_id: str) -> str:
    shown = cairn_cmd(project, "runs", "show", run_id, "--json", "--db", url)
    assert shown.returncode == 0, shown.stderr
    return str(json.loads(shown.stdout)["run"]["status"])


def worker_until(project: Path, argv: list[str], logged: str = " ready") -> subprocess.Popen[str]:
    """`cairn ARGV` started in `project`, once it has logged a line holding `logged`."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "cairn", *argv],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stderr is not None
    for log in worker.stderr:
        if logged in log:
            return worker
    worker.communicate(timeout=TIMEOUT)
    pytest.fail(f"the worker exited before logging {logged!r}")


def test_run_wait__goes_on_through_its_sleeps_to_the_result(project: Path, store_url: str) -> None:
    # Before: `cairn run` stopped at the first sleep; there was no way to wait here.
    proc = cairn_cmd(
        project, "run", "naps:twice", "1", "--run-id", "w1", "--wait", "--db", store_url
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 4
    assert proc.stderr.count("waiting here to continue it") == 2, proc.stderr
    assert "run w1 COMPLETED" in proc.stderr
    assert status(project, store_url, "w1") == "COMPLETED"


def test_run_wait__executes_its_children_and_theirs_here(project: Path, store_url: str) -> None:
    # Before: it stopped at the first child ("waits for a worker to take it"), though this
    # process imports the child's workflow and could execute it.
    proc = cairn_cmd(
        project, "run", "naps:family", "1", "--run-id", "f1", "--wait", "--db", store_url
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [111, 112]
    for run_id in ("f1", "f1/naps.child#1", "f1/naps.child#1/naps.grandchild#1"):
        assert status(project, store_url, run_id) == "COMPLETED"


def test_run_wait__follows_a_chain_continued_as_new_to_its_result(
    project: Path, store_url: str
) -> None:
    # Before: it stopped at the first continue_as_new ("continued as new: NEW; check it
    # with ..."), exit 0 and no result, the new run left PENDING for a worker, though
    # result() on any run of a chain waits for the chain's final result.
    proc = cairn_cmd(
        project, "run", "naps:rounds", "0", "--run-id", "c1", "--wait", "--db", store_url
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 3
    assert proc.stderr.count("following it here") == 2, proc.stderr
    assert status(project, store_url, "c1") == "CONTINUED"
    listed = cairn_cmd(project, "runs", "list", "--json", "--db", store_url)
    statuses = sorted(run["status"] for run in json.loads(listed.stdout)["runs"])
    assert statuses == ["COMPLETED", "CONTINUED", "CONTINUED"], listed.stdout


def test_run__stops_at_a_continue_as_new_naming_what_goes_on_with_it(
    project: Path, store_url: str
) -> None:
    proc = cairn_cmd(project, "run", "naps:rounds", "0", "--run-id", "c2", "--db", store_url)
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("run c2 continued as new")]
    assert "--wait" in line and "cairn worker --db" in line and "cairn runs show" in line


def test_run_wait__a_child_waiting_for_an_event_stops_it_as_parked(
    project: Path, store_url: str
) -> None:
    proc = cairn_cmd(
        project, "run", "naps:waits_outside", "--run-id", "o1", "--wait", "--db", store_url
    )
    assert proc.returncode == 0, proc.stderr
    assert "run o1 is WAITING" in proc.stderr, proc.stderr
    assert status(project, store_url, "o1/naps.outside#1") == "WAITING"


def test_run_wait__waits_out_a_childs_queue_limit(project: Path, store_url: str) -> None:
    # Before: the second child, held back by its queue's rate limit, stopped it as parked
    # (a limit frees by itself, like a sleep ends).
    proc = cairn_cmd(project, "run", "naps:limits", "--run-id", "q1", "--wait", "--db", store_url)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [2, 3]
    line = "run q1 waits for child run q1/naps.limited#2, held back by queue 'limited': rate "
    assert f"{line}limit 1/1s reached: waiting here to continue it" in proc.stderr
    started = []
    for child in ("q1/naps.limited#1", "q1/naps.limited#2"):
        shown = cairn_cmd(project, "runs", "show", child, "--json", "--db", store_url)
        started.append(datetime.fromisoformat(json.loads(shown.stdout)["run"]["started_at"]))
    assert (started[1] - started[0]).total_seconds() >= 0.99  # the limit held


def test_run_wait__executes_a_run_of_a_queue_here(project: Path, store_url: str) -> None:
    # Before: it stopped at once, "PENDING on queue 'limited', queued for workers".
    proc = cairn_cmd(project, "run", "naps:limited", "1", "--wait", "--db", store_url)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 2


def test_run_wait__waits_for_a_childs_step_a_live_worker_serves(
    project: Path, store_url: str
) -> None:
    # Before: it stopped as parked, though its line said "`cairn run --wait` waits for a
    # live one" and one served the step queue.
    worker = worker_until(project, ["worker", "-m", "naps", "--queue", "gpu", "--db", store_url])
    try:
        proc = cairn_cmd(
            project, "run", "naps:trains", "4", "--run-id", "t1", "--wait", "--db", store_url
        )
    finally:
        worker.terminate()
        worker.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 9
    assert (
        "run t1 waits for child run t1/naps.trained#1, WAITING for a worker of step queue "
        "'gpu' to run step 'train'; a live worker serves it: waiting here for it"
    ) in proc.stderr


def test_workflows_run__waits_for_the_result_as_pyworkflow_does(
    project: Path, store_url: str
) -> None:
    # Before: `workflows run NAME` (pyworkflow's spelling, which waits for the result)
    # stopped SLEEPING and printed no result.
    proc = cairn_cmd(
        project, "workflows", "run", "naps.twice", "--arg", "a=10", "--db", store_url, "-m", "naps"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 13


def test_run__stops_at_a_sleep_naming_the_worker_that_finishes_it(
    project: Path, store_url: str
) -> None:
    # Before: it said "`cairn worker` resumes it", which, without -m and --db, started a
    # worker on another database that could not import the workflow.
    proc = cairn_cmd(project, "run", "naps:twice", "1", "--run-id", "s1", "--db", store_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("run s1 is SLEEPING")]
    assert "--wait" in line and "cairn runs show s1" in line
    [command] = re.findall(r"start `([^`]+)`", line)
    assert command == f"cairn worker --db {shlex.quote(store_url)} -m naps"
    argv = shlex.split(command)[1:]  # run as told, from the same directory
    worker = worker_until(project, argv, "run s1 COMPLETED")
    worker.kill()
    worker.communicate(timeout=TIMEOUT)
    assert status(project, store_url, "s1") == "COMPLETED"


def test_run_wait__with_enqueue_is_bad_usage(project: Path, sqlite_url: str) -> None:
    proc = cairn_cmd(project, "run", "naps:twice", "1", "--wait", "--enqueue", "--db", sqlite_url)
    assert proc.returncode == 2
    assert "--wait and --enqueue exclude each other" in one_error_line(proc)
