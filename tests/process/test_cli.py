"""The `cairn` command end to end: real subprocesses on a SQLite file in tmp_path."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import migrated

import cairn
from cairn.store import open_store
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Lease

pytestmark = pytest.mark.process

SRC = Path(cairn.__file__).resolve().parents[1]
TIMEOUT = 30.0

FLOWS = """
import asyncio
import os

import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.step(retries=cairn.Retry(max_attempts=3, delay="10ms", jitter=0))
def flaky(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise ConnectionError("gateway down")
    return "ok"


@cairn.step(retries=1)
async def explode():
    raise ValueError("boom")


@cairn.step()
async def hang():
    await asyncio.sleep(600)


@cairn.workflow(name="flows.total")
async def total(a: int, b: int, label: str = "sum") -> dict:
    s = await add(a, b)
    f = await flaky(f"marker-{a}-{b}")
    return {"label": label, "total": s, "flaky": f}


@cairn.workflow(name="flows.broken")
async def broken() -> None:
    await add(1, 2)
    await explode()


@cairn.workflow(name="flows.snooze")
async def snooze() -> str:
    await add(1, 1)
    await cairn.sleep("1h")
    return "awake"


@cairn.workflow(name="flows.stuck")
async def stuck() -> None:
    await hang()


@cairn.workflow(name="flows.tagged")
async def tagged(order_no, who) -> None:
    cairn.set_columns(order_no=order_no, who=who)
    await add(1, 1)


@cairn.workflow(name="flows.versioned", version="2026.11")
async def versioned() -> int:
    return await add(2, 3)


@cairn.workflow(name="flows.mailer", queue="mail")
async def mailer(to: str) -> str:
    return await add("mail to ", to)


def not_a_workflow():
    return 1
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "broken_import.py").write_text("import cairn\nraise RuntimeError('bad\\nmodule')\n")
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def cairn_cmd(
    cwd: Path, *args: str, module: str = "cairn.cli.main", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def db_args(project: Path) -> list[str]:
    return ["--db", f"sqlite:///{project / 'cairn.db'}"]


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_run__executes_and_prints_the_result(project):
    proc = cairn_cmd(
        project,
        "run",
        "flows:total",
        "2",
        "3",
        "--input",
        '{"label": "x"}',
        "--run-id",
        "r1",
        *db_args(project),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"label": "x", "total": 5, "flaky": "ok"}
    progress = proc.stderr
    assert "run r1 of flows.total started" in progress
    assert "add#1" in progress
    assert "flaky#1 attempt 1 failed: builtins.ConnectionError: gateway down" in progress
    assert "2 attempts" in progress
    assert "run r1 COMPLETED" in progress


def test_run__string_args_and_default_database_from_environment(project):
    env = _env()
    env["CAIRN_DATABASE_URL"] = f"sqlite:///{project / 'env.db'}"
    proc = cairn_cmd(
        project, "run", "flows:total", "1", "2", "--input", '{"label": "o-1"}', env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["label"] == "o-1"
    assert (project / "env.db").exists()
    assert not (project / "cairn.db").exists()


def test_run__same_run_id_twice_shows_the_existing_run(project):
    first = cairn_cmd(
        project, "run", "flows:total", "1", "1", "--run-id", "same", *db_args(project)
    )
    second = cairn_cmd(
        project, "run", "flows:total", "5", "5", "--run-id", "same", *db_args(project)
    )
    assert first.returncode == second.returncode == 0
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert "already exists (COMPLETED)" in second.stderr
    listed = json.loads(cairn_cmd(project, "runs", "list", "--json", *db_args(project)).stdout)
    assert [r["run_id"] for r in listed["runs"]] == ["same"]


def test_run__failed_run_exits_1_with_one_error_line(project):
    proc = cairn_cmd(project, "run", "flows:broken", "--run-id", "bad", *db_args(project))
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("error: run 'bad' failed:")
    assert "builtins.ValueError: boom" in last
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")] == [last]
    assert "explode#1" in proc.stderr
    assert proc.stdout == ""


def test_run__sleeping_run_stops_and_says_how_to_follow_up(project):
    proc = cairn_cmd(project, "run", "flows:snooze", "--run-id", "zz", *db_args(project))
    assert proc.returncode == 0, proc.stderr
    assert "run zz is SLEEPING until" in proc.stderr
    assert "cairn worker" in proc.stderr
    assert "cairn runs show zz" in proc.stderr
    shown = json.loads(cairn_cmd(project, "runs", "show", "zz", "--json", *db_args(project)).stdout)
    assert shown["run"]["status"] == "SLEEPING"
    assert shown["run"]["wake_at"] is not None


def test_runs_list_json__filters(project):
    db = db_args(project)
    assert cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", "ok", *db).returncode == 0
    assert cairn_cmd(project, "run", "flows:broken", "--run-id", "bad", *db).returncode == 1
    everything = json.loads(cairn_cmd(project, "runs", "list", "--json", *db).stdout)
    assert {r["run_id"]: r["status"] for r in everything["runs"]} == {
        "ok": "COMPLETED",
        "bad": "FAILED",
    }
    assert everything["next_cursor"] is None
    failed = json.loads(
        cairn_cmd(project, "runs", "list", "--status", "failed", "--json", *db).stdout
    )
    assert [r["run_id"] for r in failed["runs"]] == ["bad"]
    assert failed["runs"][0]["error"]["step"] == "explode"
    by_workflow = cairn_cmd(project, "runs", "list", "--workflow", "flows.total", "--json", *db)
    assert [r["run_id"] for r in json.loads(by_workflow.stdout)["runs"]] == ["ok"]
    page = json.loads(cairn_cmd(project, "runs", "list", "--limit", "1", "--json", *db).stdout)
    assert len(page["runs"]) == 1
    assert page["next_cursor"] is not None
    rest = cairn_cmd(project, "runs", "list", "--cursor", page["next_cursor"], "--json", *db)
    assert len(json.loads(rest.stdout)["runs"]) == 1
    table = cairn_cmd(project, "runs", "list", *db)
    assert table.returncode == 0
    assert "COMPLETED" in table.stdout
    assert "FAILED" in table.stdout


def test_runs_list__origin_prefix_and_time_filters_and_80_columns(project):
    db = db_args(project)
    for run_id in ("inv-1", "inv-10", "rcpt-1"):
        ran = cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", run_id, *db)
        assert ran.returncode == 0, ran.stderr
    assert cairn_cmd(project, "run", "flows:broken", "--run-id", "inv-bad", *db).returncode == 1

    def ids(*options: str) -> list[str]:
        proc = cairn_cmd(project, "runs", "list", *options, "--json", *db)
        assert proc.returncode == 0, proc.stderr
        return [r["run_id"] for r in json.loads(proc.stdout)["runs"]]

    assert ids("--prefix", "inv-1") == ["inv-10", "inv-1"]
    assert set(ids("--origin", "api")) == {"inv-1", "inv-10", "rcpt-1", "inv-bad"}
    assert ids("--origin", "schedule") == []
    assert len(ids("--since", "2000-01-01", "--until", "2999-01-01T00:00+00:00")) == 4
    assert ids("--until", "2000-01-01") == []
    bad = cairn_cmd(project, "runs", "list", "--origin", "cron", *db)
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: unknown run origin 'cron'")
    # A table at 80 columns: each run on one line, its id and status whole.
    table = cairn_cmd(project, "runs", "list", *db, env={**_env(), "COLUMNS": "80"})
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    failed = next(line for line in lines if line.startswith("inv-bad "))
    assert "FAILED" in failed and "step 'explode'" in failed


def test_runs_list__version_column_filter_and_show(project):
    db = db_args(project)
    assert cairn_cmd(project, "run", "flows:versioned", "--run-id", "v", *db).returncode == 0
    assert cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", "t", *db).returncode == 0
    listed = cairn_cmd(project, "runs", "list", "--version", "2026.11", "--json", *db)
    assert [(r["run_id"], r["version"]) for r in json.loads(listed.stdout)["runs"]] == [
        ("v", "2026.11")
    ]
    table = cairn_cmd(project, "runs", "list", *db)
    assert "VERSION" in table.stdout
    assert "2026.11" in table.stdout
    shown = json.loads(cairn_cmd(project, "runs", "show", "v", "--json", *db).stdout)
    assert shown["run"]["version"] == "2026.11"
    assert "2026.11" in cairn_cmd(project, "runs", "show", "v", *db).stdout


def test_runs_list__where_filters_on_columns(project):
    db = db_args(project)
    assert (
        cairn_cmd(project, "run", "flows:tagged", "42", "ann", "--run-id", "a", *db).returncode == 0
    )
    assert (
        cairn_cmd(project, "run", "flows:tagged", "7", "bob", "--run-id", "b", *db).returncode == 0
    )

    def ids(*where: str) -> list[str]:
        proc = cairn_cmd(project, "runs", "list", "--json", *db, "--where", *where)
        assert proc.returncode == 0, proc.stderr
        return [r["run_id"] for r in json.loads(proc.stdout)["runs"]]

    assert ids("order_no=42") == ["a"]
    assert ids('order_no="42"') == []
    assert ids("who=bob") == ["b"]
    assert ids("who=bob", "order_no=42") == []
    table = cairn_cmd(project, "runs", "list", "--where", "who=ann", *db)
    assert "order_no=42" in table.stdout


def test_runs_show_json__facts_history_and_attempts(project):
    db = db_args(project)
    assert cairn_cmd(project, "run", "flows:total", "2", "3", "--run-id", "r1", *db).returncode == 0
    proc = cairn_cmd(project, "runs", "show", "r1", "--json", *db)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    run = shown["run"]
    assert run["status"] == "COMPLETED"
    assert run["workflow"] == "flows.total"
    assert run["args"] == [2, 3]
    assert run["kwargs"] == {}
    assert run["result"] == {"label": "sum", "total": 5, "flaky": "ok"}
    steps = [(h["key"], h["status"], h["attempts"], h["result"]) for h in shown["history"]]
    assert steps == [("add#1", "completed", 1, 5), ("flaky#1", "completed", 2, "ok")]
    inputs = [h["input"] for h in shown["history"]]
    assert inputs == [{"args": [2, 3], "kwargs": {}}, {"args": ["marker-2-3"], "kwargs": {}}]
    [attempt] = shown["attempts"]
    assert attempt["key"] == "flaky#1"
    assert attempt["error_type"] == "builtins.ConnectionError"
    assert attempt["message"] == "gateway down"
    assert "Traceback" in attempt["traceback"]


def test_runs_show__table_with_errors(project):
    db = db_args(project)
    cairn_cmd(project, "run", "flows:broken", "--run-id", "bad", *db)
    proc = cairn_cmd(project, "runs", "show", "bad", *db)
    assert proc.returncode == 0, proc.stderr
    assert "FAILED" in proc.stdout
    assert "explode#1" in proc.stdout
    assert "builtins.ValueError: boom" in proc.stdout
    assert "INPUT" in proc.stdout
    assert "(1, 2)" in proc.stdout  # add(1, 2)'s arguments, as the step received them
    assert "failed attempts (1)" in proc.stdout
    assert "Traceback" in proc.stdout


def test_db_upgrade__prints_the_schema_version(project):
    proc = cairn_cmd(project, "db", "upgrade", *db_args(project))
    assert proc.returncode == 0, proc.stderr
    assert "schema version" in proc.stdout
    assert "0001_initial" in proc.stdout
    again = cairn_cmd(project, "db", "upgrade", *db_args(project))
    assert again.returncode == 0
    assert again.stdout == proc.stdout


def test_python_m_cairn__is_the_same_command(project):
    proc = cairn_cmd(project, "db", "upgrade", *db_args(project), module="cairn")
    assert proc.returncode == 0, proc.stderr
    assert "schema version" in proc.stdout


def test_cairn_script__when_installed(project):
    script = Path(sys.executable).with_name("cairn")
    if not script.exists():
        pytest.skip("the `cairn` script is not installed in this environment (pip install -e .)")
    migrated(db_args(project)[1])
    proc = subprocess.run(
        [str(script), "runs", "list", "--json", *db_args(project)],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"runs": [], "next_cursor": None}


BAD_INPUTS = [
    (["run", "nosuch:wf"], "cannot import module 'nosuch'"),
    (["run", "broken_import:wf"], "cannot import module 'broken_import': RuntimeError: bad module"),
    (["run", "flows:nope"], "module 'flows' has no workflow 'nope'"),
    (["run", "flows:not_a_workflow"], "'flows:not_a_workflow' is a function"),
    (["runs", "show", "missing"], "run 'missing' not found"),
    (["runs", "list", "--status", "DONE"], "unknown run status 'DONE'"),
    (["runs", "list", "--where", "novalue"], "--where 'novalue' is not COL=VALUE"),
    (["-m", "broken_import", "runs", "list"], "cannot import module 'broken_import'"),
    (["worker", "--lease", "soon"], "'soon'"),
]


# Bad usage (API.md §6): exit 2, the same one line, nothing stored or sent.
BAD_USAGE = [
    (["run", "flows"], "'flows' is not MODULE:WORKFLOW"),
    (["run", "not-a-target"], "'not-a-target' is not MODULE:WORKFLOW"),
    (["run", "flows:total", "1", "2", "--input", "{bad"], "--input is not valid JSON"),
    (["run", "flows:total", "1", "2", "--input", "[1, 2]"], "--input must be a JSON object"),
    (["run", "flows:total", "{1", "2"], "argument '{1' starts like JSON but is not valid JSON"),
    (["run", "flows:total", "1"], "missing a required argument: 'b'"),
    (["send", "keep", "ev", "{oops"], "payload '{oops' starts like JSON but is not valid JSON"),
    (["send", "keep", "ev", "[1,"], "payload '[1,' starts like JSON"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_USAGE, ids=[" ".join(a) for a, _ in BAD_USAGE])
def test_bad_usage__values_exit_2_with_one_line_database_unchanged(project, argv, message):
    db = db_args(project)
    assert (
        cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", "keep", *db).returncode == 0
    )
    before = cairn_cmd(project, "runs", "show", "keep", "--json", *db).stdout
    proc = cairn_cmd(project, *argv, *db)
    assert proc.returncode == 2, proc.stderr
    assert message in one_error_line(proc)
    assert proc.stdout == ""
    assert cairn_cmd(project, "runs", "show", "keep", "--json", *db).stdout == before
    listed = json.loads(cairn_cmd(project, "runs", "list", "--json", *db).stdout)
    assert [r["run_id"] for r in listed["runs"]] == ["keep"]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input__one_line_error_exit_1_database_unchanged(project, argv, message):
    db = db_args(project)
    assert (
        cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", "keep", *db).returncode == 0
    )
    before = cairn_cmd(project, "runs", "list", "--json", *db).stdout
    proc = cairn_cmd(project, *argv, *db)
    assert proc.returncode == 1, proc.stderr
    assert message in one_error_line(proc)
    assert proc.stdout == ""
    after = cairn_cmd(project, "runs", "list", "--json", *db)
    assert after.returncode == 0
    assert after.stdout == before


@pytest.mark.parametrize(
    "argv",
    [["bogus"], ["runs"], ["runs", "list", "--limit", "x"], ["run", "flows:total", "--nope"]],
    ids=["unknown command", "missing action", "bad int", "unknown option"],
)
def test_bad_usage__one_line_error_exit_2(project, argv):
    proc = cairn_cmd(project, *argv, *db_args(project))
    assert proc.returncode == 2
    one_error_line(proc)
    assert not (project / "cairn.db").exists()


class Worker:
    """A `cairn worker` subprocess whose log lines can be awaited."""

    def __init__(self, project: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", "worker", "-m", "flows", *args],
            cwd=project,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str) -> str:
        while True:
            line = self.lines.get(timeout=TIMEOUT)
            assert line is not None, f"worker exited before logging {text!r}: {self.log}"
            self.log.append(line)
            if text in line:
                return line

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=TIMEOUT)
        while (line := self.lines.get(timeout=TIMEOUT)) is not None:
            self.log.append(line)
        self.close()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.pump.join(timeout=TIMEOUT)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def test_worker__executes_an_enqueued_run_and_stops_on_sigterm(project, workers):
    db = db_args(project)
    enqueued = cairn_cmd(project, "run", "flows:total", "4", "5", "--enqueue", *db)
    assert enqueued.returncode == 0, enqueued.stderr
    run_id = enqueued.stdout.strip()
    shown = json.loads(cairn_cmd(project, "runs", "show", run_id, "--json", *db).stdout)
    assert shown["run"]["status"] == "PENDING"
    assert shown["history"] == []

    worker = Worker(project, "--concurrency", "2", "--lease", "5s", *db)
    workers.append(worker)
    worker.wait_for(f"run {run_id} (flows.total) started")
    worker.wait_for(f"run {run_id} COMPLETED")
    assert worker.terminate() == 0
    assert any("SIGTERM received" in line for line in worker.log)
    assert "stopped" in worker.log[-1]

    shown = json.loads(cairn_cmd(project, "runs", "show", run_id, "--json", *db).stdout)
    assert shown["run"]["status"] == "COMPLETED"
    assert shown["run"]["result"] == {"label": "sum", "total": 9, "flaky": "ok"}


def test_worker__sigterm_hands_in_flight_runs_back(project, workers):
    db = db_args(project)
    run_id = cairn_cmd(project, "run", "flows:stuck", "--enqueue", *db).stdout.strip()
    worker = Worker(project, "--grace", "200ms", *db)  # its step never ends: cut off
    workers.append(worker)
    worker.wait_for(f"run {run_id} (flows.stuck) started")
    assert worker.terminate() == 0
    assert any("1 run(s) in flight handed back" in line for line in worker.log)
    shown = json.loads(cairn_cmd(project, "runs", "show", run_id, "--json", *db).stdout)
    assert shown["run"]["status"] == "PENDING"
    assert shown["run"]["owner"] is None


def test_worker__queue_option_serves_only_those_queues(project, workers):
    db = db_args(project)
    plain = cairn_cmd(project, "run", "flows:total", "1", "1", "--enqueue", *db).stdout.strip()
    mail = cairn_cmd(project, "run", "flows:mailer", "ann", "--enqueue", *db).stdout.strip()
    worker = Worker(project, "--queue", "mail", *db)
    workers.append(worker)
    worker.wait_for(f"run {mail} COMPLETED")
    assert worker.terminate() == 0
    assert not any(plain in line for line in worker.log)
    assert any("queues mail" in line for line in worker.log)
    listed = json.loads(cairn_cmd(project, "runs", "list", "--json", *db).stdout)
    assert {r["run_id"]: r["status"] for r in listed["runs"]} == {
        plain: "PENDING",
        mail: "COMPLETED",
    }


def test_run__a_run_handed_back_mid_run_is_reported_not_followed_forever(project):
    # `cairn run` claims nothing: a run whose attempt ended and was handed back (queued
    # again: the database failed mid-run) is for `cairn worker` to finish.
    url = f"sqlite:///{project / 'cairn.db'}"

    async def hand_back() -> None:
        async with cairn.Engine(url, workers=0) as engine:
            await engine.start("flows.total", 1, 2, run_id="orphan", allow_unknown=True)
        store = open_store(url)
        await store.open()
        try:
            claimed = await store.write(
                claim_ops.claim("gone-worker", 1, now=time.time(), stale=True)
            )
            assert [run.run_id for run in claimed.runs] == ["orphan"]
            await store.write(
                worker_ops.release_run("orphan", Lease("gone-worker", claimed.runs[0].fence))
            )
        finally:
            await store.close()

    asyncio.run(hand_back())
    proc = cairn_cmd(
        project, "run", "flows:total", "1", "2", "--run-id", "orphan", *db_args(project)
    )

    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run 'orphan' was handed back mid-run")
    assert "cairn worker" in last
