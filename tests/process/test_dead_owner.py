"""A RUNNING run whose `cairn worker` was killed -9: `runs show` and the API say so.

Its owner sends no heartbeat any more; with no live worker serving its queue, nothing
takes it over, and the run would otherwise read as executing. The facts come from the
workers' rows, judged as `cairn workers list` judges them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .test_cli import TIMEOUT, _env, cairn_cmd

pytestmark = pytest.mark.process

FLOWS = """
import asyncio
import os

import cairn

lane = cairn.Queue("lane")


@cairn.step()
async def hold(marker):
    with open("started", "w") as f:
        f.write("yes")
    while not os.path.exists(marker):
        await asyncio.sleep(0.05)
    return "done"


@cairn.workflow(name="owner.held", queue=lane)
async def held() -> str:
    return await hold("never")
"""


WORKER = [sys.executable, "-m", "cairn.cli.main", "worker", "-m", "flows"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _worker(project: Path, url: str, *queues: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*WORKER, "--db", url, "--lease", "1s", "--concurrency", "2", "--queue", *queues],
        cwd=project,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _cli(project: Path, url: str, *args: str) -> str:
    proc = cairn_cmd(project, *args, "--db", url, "-m", "flows")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _shown(project: Path, url: str, run_id: str) -> dict[str, Any]:
    return dict(json.loads(_cli(project, url, "runs", "show", run_id, "--json"))["run"])


def _until(what: str, ready: Any) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while not (found := ready()):
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {TIMEOUT}s")
        time.sleep(0.1)  # polling interval, not synchronisation
    return found


def _fact(table: str, key: str) -> str:
    for line in table.splitlines():
        if line.startswith(key + "  "):
            return line[len(key) :].strip()
    raise AssertionError(f"no {key!r} row in:\n{table}")


def test_runs_show__a_killed_owner_and_no_live_worker_of_its_queue(
    project: Path, store_url: str, spawned: list[subprocess.Popen[str]]
) -> None:
    url = store_url
    run_id = _cli(project, url, "run", "flows:held", "--enqueue", "--run-id", "h1").strip()
    assert run_id == "h1"
    owner = _worker(project, url, "lane")
    spawned.append(owner)
    _until("the held step", lambda: (project / "started").exists())
    run = _shown(project, url, "h1")
    assert (run["status"], run["waiting"]) == ("RUNNING", None)  # its owner is live
    owner.kill()  # kill -9: no goodbye, its heartbeats just stop
    owner.wait()
    # A worker of another queue is live: it does not take runs of queue "lane".
    spawned.append(_worker(project, url, "other"))
    run = _until(
        "the owner judged not live",
        lambda: (found := _shown(project, url, "h1"))["waiting"] and found,
    )
    waiting = run["waiting"]
    assert run["status"] == "RUNNING"
    assert (waiting["kind"], waiting["name"], waiting["owner"]) == (
        "takeover",
        "lane",
        run["owner"],
    )
    assert waiting["owner_state"] in ("silent", "dead")  # dead: a neighbour saw it end
    assert (waiting["takers"], waiting["blocked"], waiting["lease"]) == (False, "queue", 1.0)
    table = _cli(project, url, "runs", "show", "h1")
    assert f"waiting for  {_fact(table, 'waiting for')}" in table.splitlines()
    line = _fact(table, "waiting for")
    assert re.fullmatch(
        r"no takeover: owner (silent [\d.]+s \(lease 1s\)|dead \(silent [\d.]+s\)); "
        r"no live worker on 'lane'",
        line,
    ), line
    assert len(f"waiting for  {line}") <= 80
    # A worker of its queue takes it over; the line goes once it is live again.
    spawned.append(_worker(project, url, "lane"))
    _until("the takeover", lambda: _shown(project, url, "h1")["waiting"] is None)
