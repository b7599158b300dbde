"""Starting runs from the command line and a Client: typed ARGs, unknown names, real workers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import cairn

from .test_cli import Worker, _env, cairn_cmd, db_args, one_error_line
from .test_cli import workers as workers  # the fixture

pytestmark = pytest.mark.process

PRICED = """
import enum
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import cairn


class Tier(enum.Enum):
    GOLD = "gold"
    SILVER = "silver"


@dataclass
class Line:
    sku: str
    amount: Decimal


@cairn.workflow(name="priced.order")
async def order(order_id: str, amount: Decimal, due: date, tier: Tier = Tier.SILVER,
                lines: list[Line] = (), note: str | None = None) -> dict:
    return {
        "order_id": order_id,
        "amount": str(amount),
        "due": due.isoformat(),
        "tier": tier.name,
        "lines": [[line.sku, str(line.amount)] for line in lines],
        "note": note,
        "types": [type(v).__name__ for v in (order_id, amount, due, tier)],
    }


@cairn.workflow(name="priced.total")
async def total(a: int, b: int) -> int:
    return a + b
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "priced.py").write_text(PRICED)
    return tmp_path


def test_run__args_are_read_as_the_parameters_types(project: Path) -> None:
    proc = cairn_cmd(
        project,
        "run",
        "priced:order",
        "00123",
        "59.90",
        "2024-05-01",
        "GOLD",
        "--input",
        '{"lines": [{"sku": "a", "amount": 1.50}]}',
        *db_args(project),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "order_id": "00123",
        "amount": "59.90",
        "due": "2024-05-01",
        "tier": "GOLD",
        "lines": [["a", "1.5"]],
        "note": None,
        "types": ["str", "Decimal", "date", "Tier"],
    }


def test_run__decimal_input_keeps_its_digits_and_quoted_text_is_read_too(project: Path) -> None:
    proc = cairn_cmd(
        project,
        "run",
        "priced:order",
        '"o-1"',
        '"12.50"',
        '"2024-02-29"',
        "--input",
        '{"tier": "gold"}',
        *db_args(project),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["order_id"], result["amount"], result["due"]) == ("o-1", "12.50", "2024-02-29")
    assert result["tier"] == "GOLD"
    exact = cairn_cmd(
        project,
        "run",
        "priced:order",
        "o-2",
        "--input",
        '{"amount": 59.90, "due": "2024-01-01"}',
        *db_args(project),
    )
    assert exact.returncode == 0, exact.stderr
    assert json.loads(exact.stdout)["amount"] == "59.90"
    twice = cairn_cmd(
        project, "run", "priced:order", "o-3", "1", "--input", '{"amount": 2}', *db_args(project)
    )
    assert twice.returncode == 2
    assert "multiple values for argument 'amount'" in one_error_line(twice)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["o-1", "12,50", "2024-05-01"], "argument 'amount': expected Decimal, got '12,50'"),
        (["o-1", "1", "someday"], "argument 'due': expected date, got 'someday'"),
        (["o-1", "1", "2024-05-01", "BRONZE"], "not one of 'gold', 'silver'"),
        (["o-1"], "missing a required argument: 'amount'"),
        (["o-1", "1", "2024-05-01", "--input", '{"rush": 1}'], "argument 'rush'"),
        (["o-1", "1", "2024-05-01", "--input", '{"run_at": 1}'], "--input key 'run_at'"),
        (["o-1", "1", "2024-05-01", "--input", '{"queue": "q"}'], "--input key 'queue'"),
    ],
)
def test_run__arguments_that_do_not_fit_exit_2_before_anything_is_stored(
    project: Path, argv: list[str], message: str
) -> None:
    proc = cairn_cmd(project, "run", "priced:order", *argv, *db_args(project))
    assert proc.returncode == 2, proc.stderr
    assert message in one_error_line(proc)
    assert not (project / "cairn.db").exists()


def test_run__by_a_registered_name_and_typos_named(project: Path) -> None:
    db = db_args(project)
    ran = cairn_cmd(project, "run", "priced.total", "2", "3", "-m", "priced", *db)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == 5

    typo = cairn_cmd(project, "run", "priced:totl", "2", "3", *db)
    assert typo.returncode == 1
    assert "did you mean 'total'?" in one_error_line(typo)
    typo = cairn_cmd(project, "run", "priced.totl", "2", "3", "-m", "priced", *db)
    assert typo.returncode == 2
    assert "did you mean 'priced.total'?" in one_error_line(typo)

    unknown = cairn_cmd(project, "run", "priced.totl", "--enqueue", "-m", "priced", *db)
    assert unknown.returncode == 1
    line = one_error_line(unknown)
    assert "unknown workflow 'priced.totl'" in line
    assert "did you mean 'priced.total'?" in line
    assert "add --allow-unknown" in line
    queued = cairn_cmd(project, "run", "later.flow", "1", "--enqueue", "--allow-unknown", *db)
    assert queued.returncode == 0, queued.stderr
    run_id = queued.stdout.strip()
    shown = json.loads(cairn_cmd(project, "runs", "show", run_id, "--json", *db).stdout)
    assert (shown["run"]["workflow"], shown["run"]["status"]) == ("later.flow", "PENDING")
    lone = cairn_cmd(project, "run", "priced:total", "1", "2", "--allow-unknown", *db)
    assert lone.returncode == 2
    assert "--allow-unknown applies only with --enqueue" in one_error_line(lone)


def test_start__a_name_only_a_live_worker_process_knows_is_accepted(
    project: Path, workers: list[Worker]
) -> None:
    db = db_args(project)
    url = db[1]
    (project / "flows.py").write_text((project / "priced.py").read_text())  # Worker: -m flows
    worker = Worker(project, "--lease", "5s", *db)
    workers.append(worker)
    worker.wait_for("ready")  # registered

    # This process imports neither module: only the worker's row knows the names.
    cli = cairn_cmd(project, "run", "priced.total", "4", "5", "--enqueue", *db)
    assert cli.returncode == 0, cli.stderr
    worker.wait_for(f"run {cli.stdout.strip()} COMPLETED")

    def from_client() -> tuple[object, str]:
        with cairn.Client(url, registry=cairn.Registry()) as client:
            with pytest.raises(cairn.UnknownWorkflow, match=r"did you mean 'priced\.order'"):
                client.start("priced.ordr", "o-1", "1", "2024-01-01")
            handle = client.start("priced.total", 20, 22)
            return handle.result(timeout=30), handle.run_id

    result, run_id = asyncio.run(asyncio.to_thread(from_client))
    assert result == 42
    worker.wait_for(f"run {run_id} COMPLETED")
    assert worker.terminate() == 0

    # Stopped, the worker's names stay known (for a deploy's gap).
    later = cairn_cmd(project, "run", "priced.total", "1", "1", "--enqueue", *db)
    assert later.returncode == 0, later.stderr
    env_strict = cairn_cmd(
        project,
        "run",
        "priced.total",
        "1",
        "1",
        "--enqueue",
        *db,
        env={**_env(), "CAIRN_KNOWN_WORKERS_WINDOW": "0s"},
    )
    assert env_strict.returncode == 1
    assert "no worker seen in the last 0 seconds" in one_error_line(env_strict)


def test_schedules_create__unknown_names_and_misfit_arguments(project: Path) -> None:
    db = db_args(project)
    unknown = cairn_cmd(
        project, "schedules", "create", "s1", "priced.ordr", "--every", "1h", "-m", "priced", *db
    )
    assert unknown.returncode == 1
    assert "did you mean 'priced.order'?" in one_error_line(unknown)
    assert "add --allow-unknown" in one_error_line(unknown)
    misfit = cairn_cmd(
        project, "schedules", "create", "s2", "priced:order", "o-1", "--every", "1h", *db
    )
    assert misfit.returncode == 2
    assert "missing a required argument: 'amount'" in one_error_line(misfit)
    typed = cairn_cmd(
        project,
        "schedules",
        "create",
        "s3",
        "priced.order",
        "o-1",
        "9.90",
        "2024-05-01",
        "--every",
        "1h",
        "--json",
        "-m",
        "priced",
        *db,
    )
    assert typed.returncode == 0, typed.stderr
    assert json.loads(typed.stdout)["args"][:2] == ["o-1", "9.90"]
    later = cairn_cmd(
        project, "schedules", "create", "s4", "else.where", "--every", "1h", "--allow-unknown", *db
    )
    assert later.returncode == 0, later.stderr
