"""`cairn run` and `cairn worker` on memory:// and file:///dir, as real subprocesses.

A worker killed with SIGKILL on a file:/// store and started again on the same directory
finishes the run without repeating its completed step (the side-effect file proves it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .test_cli import Worker, cairn_cmd, one_error_line, workers  # noqa: F401

pytestmark = pytest.mark.process

FLOWS = """
import asyncio
import os
from pathlib import Path

import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.step()
async def note(text):
    with open("effects.txt", "a") as file:
        file.write(f"{text} pid={os.getpid()}\\n")
    return text


@cairn.step()
async def wait_for_release():
    Path("waiting").touch()  # the step before is in the journal by now
    while not Path("release").exists():
        await asyncio.sleep(0.02)
    return "released"


@cairn.workflow(name="flows.total")
async def total(a: int, b: int) -> int:
    return await add(a, b)


@cairn.workflow(name="flows.resume")
async def resume() -> str:
    await note("first")
    return await wait_for_release()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def test_run__memory_url_executes_and_says_nothing_is_kept(project: Path) -> None:
    proc = cairn_cmd(project, "run", "flows:total", "4", "5", "--db", "memory://")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 9
    assert "database memory:// (in memory: this process only, gone when it exits)" in proc.stderr
    assert {p.name for p in project.iterdir()} <= {"__pycache__", "flows.py"}  # no file


def test_run__file_url_keeps_the_run_in_the_directory(project: Path) -> None:
    url = f"file://{project / 'store'}"
    proc = cairn_cmd(project, "run", "flows:total", "4", "5", "--db", url)
    assert proc.returncode == 0, proc.stderr
    assert f"(SQLite file {project / 'store' / 'cairn.db'})" in proc.stderr
    listed = json.loads(cairn_cmd(project, "runs", "list", "--json", "--db", url).stdout)
    assert [r["status"] for r in listed["runs"]] == ["COMPLETED"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "flows:total", "1", "2", "--enqueue"], "cairn run --enqueue"),
        (["worker", "-m", "flows", "--transport", "celery"], "cairn worker --transport celery"),
    ],
)
def test_memory_url__commands_that_need_other_processes_refuse_it(
    project: Path, argv: list[str], message: str
) -> None:
    proc = cairn_cmd(project, *argv, "--db", "memory://")
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert message in line and "'memory://'" in line and "other processes" in line


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memory://db", "invalid memory URL 'memory://db'"),
        ("file://", "invalid file URL 'file://': no directory"),
        ("FILE", "is a file, not a directory"),
    ],
)
def test_bad_store_url__one_line_error_naming_it(project: Path, url: str, message: str) -> None:
    url = f"file://{project / 'flows.py'}" if url == "FILE" else url
    proc = cairn_cmd(project, "runs", "list", "--db", url)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert message in line and repr(url) in line


def test_worker__memory_url_serves_and_stops(project: Path, workers: list[Worker]) -> None:  # noqa: F811
    worker = Worker(project, "--db", "memory://")
    workers.append(worker)
    started = worker.wait_for("worker starting")
    assert "database memory:// (in memory" in started
    worker.wait_for("ready")
    assert worker.terminate() == 0


def test_worker__killed_on_a_file_store_resumes_when_started_again(
    project: Path,
    workers: list[Worker],  # noqa: F811
) -> None:
    db = ["--db", f"file://{project / 'store'}"]
    enqueued = cairn_cmd(project, "run", "flows:resume", "--enqueue", *db)
    assert enqueued.returncode == 0, enqueued.stderr
    run_id = enqueued.stdout.strip()

    first = Worker(project, "--lease", "1s", *db)
    workers.append(first)
    first.wait_for(f"run {run_id} (flows.resume) started")
    _until((project / "waiting").exists)
    first.proc.kill()  # SIGKILL in the step that waits: nothing is handed back
    first.proc.wait(timeout=30)

    (project / "release").touch()
    second = Worker(project, "--lease", "1s", *db)
    workers.append(second)
    second.wait_for(f"run {run_id} COMPLETED")
    assert second.terminate() == 0
    shown = json.loads(cairn_cmd(project, "runs", "show", run_id, "--json", *db).stdout)
    assert shown["run"]["result"] == "released"
    lines = (project / "effects.txt").read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("first pid=")  # never twice


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_cairn_yaml__read_by_run_and_worker(project: Path, workers: list[Worker]) -> None:  # noqa: F811
    (project / "cairn.yaml").write_text("module: flows\nstorage:\n  type: file\n  path: store\n")
    proc = cairn_cmd(project, "run", "flows.total", "2", "3")  # by name: module from the file
    assert proc.returncode == 0, proc.stderr
    assert f"(SQLite file {project / 'store' / 'cairn.db'})" in proc.stderr

    enqueued = cairn_cmd(project, "run", "flows.total", "5", "6", "--enqueue")
    worker = Worker(project)
    workers.append(worker)
    assert f"file://{project / 'store'}" in worker.wait_for("worker starting")
    worker.wait_for(f"run {enqueued.stdout.strip()} COMPLETED")
    assert worker.terminate() == 0


def test_cairn_yaml__a_bad_key_is_one_line_naming_it(project: Path) -> None:
    (project / "cairn.yaml").write_text("storage: {type: memory}\nruntime: celery\n")
    proc = cairn_cmd(project, "runs", "list")
    assert proc.returncode == 1
    assert "cairn.yaml key 'runtime' has no meaning in cairn" in one_error_line(proc)
