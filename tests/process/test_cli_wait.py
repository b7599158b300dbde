"""`cairn run --wait` and `cairn workflows run` through a run's sleeps; what `cairn run` says
when it stops at one. Real subprocesses, on both stores."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
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


@cairn.workflow(name="naps.outside")
async def outside() -> None:
    await cairn.wait_for_event("never")


@cairn.workflow(name="naps.waits_outside")
async def waits_outside() -> None:
    await outside()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "naps.py").write_text(FLOWS)
    return tmp_path


def status(project: Path, url: str, run_id: str) -> str:
    shown = cairn_cmd(project, "runs", "show", run_id, "--json", "--db", url)
    assert shown.returncode == 0, shown.stderr
    return str(json.loads(shown.stdout)["run"]["status"])


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


def test_run_wait__a_child_waiting_for_an_event_stops_it_as_parked(
    project: Path, store_url: str
) -> None:
    proc = cairn_cmd(
        project, "run", "naps:waits_outside", "--run-id", "o1", "--wait", "--db", store_url
    )
    assert proc.returncode == 0, proc.stderr
    assert "run o1 is WAITING" in proc.stderr, proc.stderr
    assert status(project, store_url, "o1/naps.outside#1") == "WAITING"


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
    worker = subprocess.Popen(
        [sys.executable, "-m", "cairn", *argv],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        for log in worker.stderr:
            if "run s1 COMPLETED" in log:
                break
        else:
            pytest.fail("the worker exited before completing run s1")
    finally:
        worker.kill()
        worker.communicate(timeout=TIMEOUT)
    assert status(project, store_url, "s1") == "COMPLETED"


def test_run_wait__with_enqueue_is_bad_usage(project: Path, sqlite_url: str) -> None:
    proc = cairn_cmd(project, "run", "naps:twice", "1", "--wait", "--enqueue", "--db", sqlite_url)
    assert proc.returncode == 2
    assert "--wait and --enqueue exclude each other" in one_error_line(proc)
