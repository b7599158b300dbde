"""pyworkflow's command-line spellings: `workflows run NAME --arg/--args-json/--no-wait`,
`hooks list` with tokens, `hooks resume TOKEN --payload/--payload-file`. Real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_cli import TIMEOUT, Worker, _env, cairn_cmd, one_error_line
from .test_cli import workers as workers  # the fixture

pytestmark = pytest.mark.process

FLOWS = """
from decimal import Decimal

import cairn


@cairn.workflow(name="shop.total")
async def total(order_id: str, amount: Decimal, count: int = 1, tags: list = ()) -> dict:
    return {
        "order_id": order_id,
        "amount": str(amount * count),
        "tags": list(tags),
        "types": [type(order_id).__name__, type(amount).__name__, type(count).__name__],
    }


@cairn.workflow(name="shop.approve")
async def approve(order_id: str) -> dict:
    hook = await cairn.create_hook("approval", timeout="1h")
    return {"order_id": order_id, "payload": await hook}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cairn_cmd(project, *args, "--db", f"sqlite:///{project / 'c.db'}", "-m", "flows")


def ok(project: Path, *args: str) -> Any:
    proc = cli(project, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def failed(project: Path, *args: str, code: int) -> str:
    proc = cli(project, *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    return one_error_line(proc)


# workflows run


def test_workflows_run__keyword_args_typed_and_waits_for_the_result(project):
    result = ok(
        project,
        "workflows",
        "run",
        "shop.total",
        "--arg",
        "order_id=00123",
        "--arg",
        "count=2",
        "--args-json",
        '{"amount": 29.95, "tags": ["a"]}',
    )
    # 00123 stays text for a str; 29.95 keeps its digits for a Decimal; 2 is an int.
    assert result == {
        "order_id": "00123",
        "amount": "59.90",
        "tags": ["a"],
        "types": ["str", "Decimal", "int"],
    }


def test_workflows_run__no_wait_prints_the_run_id_at_once(project):
    proc = cli(
        project, "workflows", "run", "shop.total", "--arg", "order_id=o1", "--arg", "amount=1",
        "--no-wait", "--run-id", "r1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "r1"
    shown = ok(project, "runs", "show", "r1", "--json")
    assert (shown["run"]["status"], shown["run"]["kwargs"]) == (
        "PENDING",
        {"order_id": "o1", "amount": "1"},
    )


def test_workflows_run__no_wait_queues_a_name_only_workers_know(project):
    unknown = failed(project, "workflows", "run", "billing.close", code=2)
    assert "add --no-wait to queue it" in unknown
    proc = cli(project, "workflows", "run", "billing.close", "--no-wait", "--allow-unknown")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arg", "order_id=a", "--arg", "order_id=b"],
         "'order_id' of workflow 'shop.total' is given twice with --arg"),
        (["--arg", "amount=1", "--args-json", '{"amount": 2}'],
         "'amount' of workflow 'shop.total' is given by --arg and --args-json"),
        (["--args-json", '{"amount": 2'], "--args-json is not valid JSON"),
        (["--args-json", "[1]"], "--args-json must be a JSON object"),
        (["--arg", "amount"], "--arg 'amount' is not NAME=VALUE"),
        (["--arg", "order_id=o", "--arg", "amount=1,5"], "argument 'amount': expected Decimal"),
        (["--arg", "order_id=o"], "missing a required argument: 'amount'"),
        (["--arg", "order_id=o", "--arg", "amount=1", "--arg", "queue=q"],
         "--arg key 'queue' is reserved"),
        (["--arg", "order_id=o", "--arg", "amount=1", "--allow-unknown"],
         "--allow-unknown applies only with --no-wait"),
    ],
)  # fmt: skip
def test_workflows_run__bad_arguments_exit_2_naming_the_fault(project, argv, message):
    assert message in failed(project, "workflows", "run", "shop.total", *argv, code=2)
    assert not (project / "c.db").exists()  # refused before any database was opened


# hooks list and resume


def _waiting(project: Path, run_id: str) -> str:
    proc = cli(project, "workflows", "run", "shop.approve", "--arg", "order_id=o1",
               "--run-id", run_id)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"run {run_id} is WAITING" in proc.stderr
    [hook] = ok(project, "hooks", "list", "--run", run_id, "--json")["hooks"]
    assert hook["name"] == "approval"
    return str(hook["token"])


def _result(project: Path, workers: list[Worker], run_id: str) -> Any:
    """The run's result once a worker has continued it with the hook's payload."""
    worker = Worker(project, "--db", f"sqlite:///{project / 'c.db'}")
    workers.append(worker)
    worker.wait_for(f"run {run_id} COMPLETED")
    worker.terminate()
    return ok(project, "runs", "show", run_id, "--json")["run"]["result"]


def test_hooks_resume__payload_option_with_the_listed_token(project, workers):
    token = _waiting(project, "h1")
    db = f"sqlite:///{project / 'c.db'}"
    table = cairn_cmd(project, "hooks", "list", "--db", db, env={**_env(), "COLUMNS": "80"})
    assert token in table.stdout  # whole, on one line, in 80 columns
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    assert ok(project, "hooks", "resume", token, "--payload", '{"ok": true}', "--json") == {
        "run_id": "h1",
        "resumed": True,
    }
    assert _result(project, workers, "h1") == {"order_id": "o1", "payload": {"ok": True}}


def test_hooks_resume__payload_file_and_stdin(project, workers):
    token = _waiting(project, "h1")
    (project / "payload.json").write_text('{"by": "file"}\n')
    assert cli(project, "hooks", "resume", token, "--payload-file", "payload.json").returncode == 0
    assert _result(project, workers, "h1")["payload"] == {"by": "file"}

    token = _waiting(project, "h2")
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "hooks", "resume", token, "--payload-file", "-",
         "--db", f"sqlite:///{project / 'c.db'}"],
        input='{"by": "stdin"}', cwd=project, env=_env(), capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _result(project, workers, "h2")["payload"] == {"by": "stdin"}


def test_hooks_resume__bad_payload_input_one_line_error_hook_still_open(project):
    token = _waiting(project, "h1")
    (project / "bad.json").write_text('{"ok": tru')
    both = failed(project, "hooks", "resume", token, "{}", "--payload", "{}", code=2)
    assert both == "error: the payload is given twice (JSON and --payload): give one"
    missing = failed(project, "hooks", "resume", token, "--payload-file", "nope.json", code=1)
    assert "--payload-file 'nope.json': cannot read it" in missing
    bad = failed(project, "hooks", "resume", token, "--payload-file", "bad.json", code=1)
    assert "--payload-file 'bad.json' is not valid JSON" in bad
    broken = failed(project, "hooks", "resume", token, "--payload", "{ok", code=2)
    assert "--payload '{ok' starts like JSON but is not valid JSON" in broken
    assert [h["token"] for h in ok(project, "hooks", "list", "--json")["hooks"]] == [token]
