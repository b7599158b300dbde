"""`cairn workflows list`, `cairn hooks list|resume` and transient runs: real subprocesses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import migrated

from .test_cli import TIMEOUT, Worker, cairn_cmd, one_error_line

pytestmark = pytest.mark.process

FLOWS = """
import pathlib

import cairn

calls = {"charge": 0}


@cairn.step()
async def note_token(path, token):
    pathlib.Path(path).write_text(token)


@cairn.step(retries=cairn.Retry(max_attempts=3, delay="10ms", jitter=0))
async def charge(amount):
    calls["charge"] += 1
    if calls["charge"] < 2:
        raise ConnectionError("gateway busy")
    return amount * 2


@cairn.workflow(name="cat.pay", version="7")
async def pay(path: str) -> dict:
    hook = await cairn.create_hook("paid", timeout="1h")
    await note_token(path, hook.token)
    return await hook


@cairn.workflow(name="cat.mail", queue="mail")
async def mail() -> None:
    return None


@cairn.workflow(name="cat.on_signup", on="user.signup")
async def on_signup(payload) -> None:
    return None


@cairn.workflow(name="cat.quick", durable=False)
async def quick(amount: int) -> dict:
    charged = await charge(amount)
    await cairn.sleep("50ms")
    return {"charged": charged}


@cairn.workflow(name="cat.broken", durable=False)
async def broken() -> None:
    raise ValueError("no stock")
"""

REMOTE = """
import cairn


@cairn.workflow(name="remote.only")
async def only() -> None:
    return None
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "remote.py").write_text(REMOTE)
    return tmp_path


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def db(project: Path) -> list[str]:
    return ["--db", f"sqlite:///{project / 'cairn.db'}"]


def cli(project: Path, *args: str) -> Any:
    return cairn_cmd(project, *args, *db(project), "-m", "flows")


def as_json(project: Path, *args: str) -> Any:
    proc = cli(project, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def failed(project: Path, *args: str, code: int = 1) -> str:
    proc = cli(project, *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    return one_error_line(proc)


# workflows


def test_workflows_list__local_ones_with_their_options(project):
    migrated(db(project)[1])
    listed = as_json(project, "workflows", "list")["workflows"]
    by_name = {w["name"]: w for w in listed}
    assert [w["name"] for w in listed] == sorted(by_name)
    assert by_name["cat.mail"]["queue"] == "mail"
    assert by_name["cat.pay"] == {
        "name": "cat.pay",
        "queue": None,
        "version": "7",
        "on": None,
        "durable": True,
        "local": True,
        "workers": [],
    }
    assert by_name["cat.on_signup"]["on"] == "user.signup"
    assert by_name["cat.quick"]["durable"] is False


def test_workflows_list__adds_what_live_workers_execute(project, workers):
    workers.append(Worker(project, "-m", "remote", *db(project)))
    workers[-1].wait_for("ready")  # it has created the database by then
    deadline = time.monotonic() + TIMEOUT
    while True:
        by_name = {w["name"]: w for w in as_json(project, "workflows", "list")["workflows"]}
        if by_name.get("remote.only", {}).get("workers"):
            break
        assert time.monotonic() < deadline, f"the worker never showed up: {by_name}"
        time.sleep(0.1)
    (worker_id,) = by_name["remote.only"]["workers"]
    assert by_name["remote.only"] == {
        "name": "remote.only",
        "queue": None,
        "version": None,
        "on": None,
        "durable": None,
        "local": False,
        "workers": [worker_id],
    }
    assert by_name["cat.pay"]["local"] is True
    assert by_name["cat.pay"]["workers"] == [worker_id]
    # A worker never executes a transient workflow, so it does not say it does.
    assert by_name["cat.quick"]["workers"] == []

    table = cli(project, "workflows", "list")
    assert table.returncode == 0, table.stderr
    assert "cat.quick" in table.stdout
    assert "remote.only" in table.stdout
    assert "local" in table.stdout


def test_workflows_list__nothing_known(project):
    migrated(db(project)[1])
    proc = cairn_cmd(project, "workflows", "list", *db(project))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no workflows: none registered here")
    assert json.loads(cairn_cmd(project, "workflows", "list", "--json", *db(project)).stdout) == {
        "workflows": []
    }


def test_workflows_list__bad_module_and_usage(project):
    proc = cairn_cmd(project, "workflows", "list", "-m", "nope", *db(project))
    assert proc.returncode == 1
    assert "cannot import module 'nope'" in one_error_line(proc)
    proc = cairn_cmd(project, "workflows", *db(project))
    assert proc.returncode == 2
    assert "required: ACTION" in one_error_line(proc)


# hooks


def _waiting_on_a_hook(project: Path, run_id: str) -> str:
    """Start cat.pay here until it waits on its hook; the token it was given."""
    token_file = project / f"{run_id}.token"
    proc = cli(project, "run", "flows:pay", str(token_file), "--run-id", run_id)
    assert proc.returncode == 0, proc.stderr
    assert f"run {run_id} is WAITING" in proc.stderr
    return token_file.read_text()


def test_hooks__list_shows_the_token_then_resume_once(project):
    token = _waiting_on_a_hook(project, "p1")
    listed = as_json(project, "hooks", "list")["hooks"]
    assert [(h["run_id"], h["name"], h["token"]) for h in listed] == [("p1", "paid", token)]
    assert listed[0]["expires_at"] is not None
    table = cli(project, "hooks", "list")
    assert "p1" in table.stdout and "paid" in table.stdout
    assert token in table.stdout  # whole, to copy into `cairn hooks resume`

    resumed = as_json(project, "hooks", "resume", token, '{"paid": true}')
    assert resumed == {"run_id": "p1", "resumed": True}
    assert as_json(project, "hooks", "list")["hooks"] == []
    assert cli(project, "hooks", "list").stdout.strip() == "no open hooks"

    again = failed(project, "hooks", "resume", token, "{}")
    assert again == f"error: hook token {token!r} is unknown, already used or expired"


def test_hooks__list_filters_by_run_and_limits(project):
    _waiting_on_a_hook(project, "p1")
    _waiting_on_a_hook(project, "p2")
    assert [h["run_id"] for h in as_json(project, "hooks", "list")["hooks"]] == ["p1", "p2"]
    assert [h["run_id"] for h in as_json(project, "hooks", "list", "--run", "p2")["hooks"]] == [
        "p2"
    ]
    assert len(as_json(project, "hooks", "list", "--limit", "1")["hooks"]) == 1
    assert cli(project, "hooks", "list", "--run", "zz").stdout.strip() == "no open hooks of run zz"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["hooks", "resume", "no-such-token"], 1, "hook token 'no-such-token' is unknown"),
        (["hooks", "resume", "tok", "{bad"], 2, "JSON '{bad' starts like JSON but is not"),
        (["hooks", "list", "--limit", "0"], 1, "--limit must be a positive integer, got 0"),
        (["hooks", "list", "--limit", "x"], 2, "argument --limit: invalid int value: 'x'"),
        (["hooks", "resume"], 2, "the following arguments are required: TOKEN"),
    ],
)
def test_hooks__bad_input_one_line_error(project, argv, code, message):
    migrated(db(project)[1])
    assert message in failed(project, *argv, code=code)


# transient runs on the command line


def test_run__a_transient_workflow_runs_in_memory_without_a_database(project):
    proc = cairn_cmd(project, "run", "flows:quick", "21", "--run-id", "t1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"charged": 42}
    assert "run t1 of cat.quick started (transient: in memory only)" in proc.stderr
    assert "charge#1 attempt 1 failed: builtins.ConnectionError: gateway busy" in proc.stderr
    assert "run t1 COMPLETED" in proc.stderr
    assert not (project / "cairn.db").exists()


def test_run__a_failed_transient_run_shows_its_traceback_now(project):
    proc = cairn_cmd(project, "run", "flows:broken", "--run-id", "t2")
    assert proc.returncode == 1
    assert 'raise ValueError("no stock")' in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last == "error: run 't2' failed: builtins.ValueError: no stock"


def test_run__enqueue_of_a_transient_workflow_is_refused(project):
    migrated(db(project)[1])
    message = failed(project, "run", "flows:quick", "1", "--enqueue")
    assert message == (
        "error: workflow 'cat.quick' is transient (durable=False): its runs live only in "
        "the memory of the process that starts them, so --enqueue cannot queue it for "
        "workers; run it without --enqueue"
    )
    assert as_json(project, "runs", "list")["runs"] == []
