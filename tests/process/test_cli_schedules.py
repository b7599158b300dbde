"""`cairn schedules ...` end to end: real subprocesses on a SQLite file in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cairn

pytestmark = pytest.mark.process

SRC = Path(cairn.__file__).resolve().parents[1]

FLOWS = """
import cairn


@cairn.workflow(name="reports.nightly")
async def nightly(region: str, *, full: bool = False) -> dict:
    return {"region": region, "full": full, "at": str(cairn.current_run().scheduled_at)}
"""


def cairn_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(tmp_path)]))
    env.pop("CAIRN_DATABASE_URL", None)
    env.pop("CAIRN_MODULES", None)
    return subprocess.run(
        [sys.executable, "-m", "cairn", "--db", f"sqlite:///{tmp_path / 'c.db'}", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_schedules_cli__create_list_pause_resume_trigger_delete(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    made = cairn_cli(
        tmp_path,
        "schedules",
        "create",
        "eu-nightly",
        "flows:nightly",
        "eu",
        "--input",
        '{"full": true}',
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--overlap",
        "buffer_one",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["workflow"] == "reports.nightly" and created["source"] == "api"
    assert (created["args"], created["kwargs"]) == (["eu"], {"full": True})

    listed = cairn_cli(tmp_path, "schedules", "list")
    assert listed.returncode == 0, listed.stderr
    assert "eu-nightly" in listed.stdout and "cron 0 2 * * * (Europe/Berlin)" in listed.stdout

    assert cairn_cli(tmp_path, "schedules", "pause", "eu-nightly").stdout.strip() == (
        "schedule eu-nightly paused"
    )
    listing = json.loads(cairn_cli(tmp_path, "schedules", "list", "--json").stdout)
    assert [s["paused"] for s in listing["schedules"]] == [True]
    resumed = cairn_cli(tmp_path, "schedules", "resume", "eu-nightly")
    assert resumed.returncode == 0 and "resumed, next tick" in resumed.stdout

    triggered = cairn_cli(tmp_path, "schedules", "trigger", "eu-nightly")
    assert triggered.returncode == 0, triggered.stderr
    run_id = triggered.stdout.strip()
    assert run_id.startswith("sched:eu-nightly:trigger:")
    shown = json.loads(cairn_cli(tmp_path, "runs", "show", run_id, "--json").stdout)
    assert shown["run"]["status"] == "PENDING" and shown["run"]["scheduled_at"] is not None

    assert cairn_cli(tmp_path, "schedules", "delete", "eu-nightly").returncode == 0
    gone = cairn_cli(tmp_path, "schedules", "delete", "eu-nightly")
    assert (gone.returncode, gone.stderr) == (1, "error: schedule 'eu-nightly' not found\n")
    assert cairn_cli(tmp_path, "schedules", "list").stdout.strip() == "no schedules"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--cron", "0 2 * *"], 1, "need 5 fields"),
        (["--every", "1h", "--tz", "Moon/Base"], 1, "unknown time zone 'Moon/Base'"),
        (["--every", "soon"], 1, "invalid duration for --every: 'soon'"),
        ([], 2, "one of the arguments --cron --every is required"),
        (["--cron", "0 2 * * *", "--every", "1h"], 2, "not allowed with argument"),
        (["--every", "1h", "--overlap", "queue"], 2, "invalid choice: 'queue'"),
    ],
)
def test_schedules_cli__bad_create_is_one_error_line(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    done = cairn_cli(tmp_path, "schedules", "create", "x", "some.workflow", *args)
    assert done.returncode == code
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr


def test_schedules_cli__creating_one_again_says_it_exists(tmp_path: Path) -> None:
    # Before: the same create twice said "created" twice, with a "first tick" that was not.
    (tmp_path / "flows.py").write_text(FLOWS)
    argv = ("schedules", "create", "eu-nightly", "flows:nightly", "eu", "--every", "1h")
    first = cairn_cli(tmp_path, *argv)
    assert first.returncode == 0 and "schedule eu-nightly created: every 1h, first tick" in (
        first.stdout
    )
    again = cairn_cli(tmp_path, *argv)
    assert again.returncode == 0, again.stderr
    assert "schedule eu-nightly exists already: every 1h, next tick" in again.stdout
    other = cairn_cli(tmp_path, *argv[:-1], "2h")
    assert other.returncode == 1 and other.stderr.startswith("error: ")
