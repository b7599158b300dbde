"""The steering, inbox, queue and project commands end to end: real subprocesses, SQLite."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import migrated

from .test_cli import TIMEOUT, Worker, _env, cairn_cmd, one_error_line

pytestmark = pytest.mark.process

FLOWS = """
import asyncio
import os

import cairn

slow = cairn.Queue("slow", concurrency=1)


@cairn.step()
async def add(a, b):
    return a + b


@cairn.step()
async def gate(marker):
    # Holds a slot of queue "slow" until the test creates the marker file.
    while not os.path.exists(marker):
        await asyncio.sleep(0.02)
    return "open"


@cairn.step(retries=1)
async def needs(marker):
    if not os.path.exists(marker):
        raise ValueError(f"no {marker} yet")
    return "fixed"


@cairn.workflow(name="ctl.approve")
async def approve(order: int) -> dict:
    cairn.set_columns(order=order)
    await add(order, 1)
    cairn.progress("asking for approval", current=1, total=2)
    decision = await cairn.wait_for_event("approval", timeout="1h")
    return {"order": order, "decision": decision}


@cairn.workflow(name="ctl.twice")
async def twice() -> list:
    return [await cairn.wait_for_event("n"), await cairn.wait_for_event("n")]


@cairn.workflow(name="ctl.review")
async def review(order: int) -> dict:
    return await cairn.human_task(
        "review",
        title=f"Review order {order}",
        data={"order": order, "amount": 12.5},
        form={
            "type": "object",
            "properties": {
                "ok": {"type": "boolean", "description": "approve the order"},
                "note": {"type": "string"},
            },
            "required": ["ok"],
        },
        assignee="ann",
        timeout="1d",
    )


@cairn.workflow(name="ctl.nap")
async def nap() -> str:
    await add(1, 1)
    await cairn.sleep("1h")
    return "awake"


@cairn.workflow(name="ctl.fragile")
async def fragile(marker: str) -> str:
    await add(1, 2)
    return await needs(marker)


@cairn.workflow(name="ctl.three")
async def three(start: int) -> int:
    a = await add(start, 1)
    b = await add(a, 1)
    return await add(b, 1)


@cairn.step()
async def tick(i):
    await asyncio.sleep(0.02)
    return i


@cairn.workflow(name="ctl.ticker")
async def ticker() -> int:
    # Ticks until a file "stop" appears (at most 2000 times): only a request ends it early.
    i = 0
    while i < 2000 and not os.path.exists("stop"):
        await tick(i)
        i += 1
    return i


@cairn.workflow(name="ctl.relay")
async def relay(n: int) -> str:
    if n < 1:
        cairn.continue_as_new(n + 1)
    return await cairn.wait_for_event("go")


@cairn.workflow(name="ctl.limited", queue=slow)
async def limited(marker: str) -> str:
    return await gate(marker)
"""

DUPLICATE = """
import cairn

@cairn.workflow(name="same")
async def first() -> None: ...

@cairn.workflow(name="same")
async def second() -> None: ...
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "dup.py").write_text(DUPLICATE)
    (tmp_path / "broken_import.py").write_text("raise RuntimeError('bad\\nmodule')\n")
    (tmp_path / "ghost.py").write_text("import cairn\ncairn.schedule('ghost', every='1h')\n")
    return tmp_path


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def cli(project: Path, *args: str) -> Any:
    """Run `cairn ARGS --db ... -m flows` and return the process."""
    return cairn_cmd(project, *args, "--db", f"sqlite:///{project / 'cairn.db'}", "-m", "flows")


def ok(project: Path, *args: str) -> Any:
    proc = cli(project, *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def as_json(project: Path, *args: str) -> Any:
    return json.loads(ok(project, *args, "--json").stdout)


def shown(project: Path, run_id: str) -> dict[str, Any]:
    return as_json(project, "runs", "show", run_id)["run"]


def wait_all(worker: Worker, texts: list[str]) -> None:
    """Wait until the worker has logged a line containing each text, in any order."""
    pending = [text for text in texts if not any(text in line for line in worker.log)]
    while pending:
        line = worker.lines.get(timeout=TIMEOUT)
        assert line is not None, f"worker exited before logging {pending}: {worker.log}"
        worker.log.append(line)
        pending = [text for text in pending if text not in line]


def fact(table: str, key: str) -> str:
    """The value of row `key` in the facts grid of `runs show` or `tasks show`."""
    for line in table.splitlines():
        if line.startswith(key + "  "):
            return line[len(key) :].strip()
    raise AssertionError(f"no {key!r} row in:\n{table}")


def failed(project: Path, *args: str, code: int = 1) -> str:
    proc = cli(project, *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    return one_error_line(proc)


def test_run__shows_progress_live_and_how_to_send_the_event(project):
    proc = ok(project, "run", "flows:approve", "7", "--run-id", "ap")
    assert "… asking for approval · 1/2 (50%)" in proc.stderr
    assert "waiting for event 'approval'" in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("run ap is WAITING for event 'approval', times out ")
    assert "send it with `cairn send ap approval JSON`" in last
    assert "cairn runs show ap" in last


@pytest.mark.parametrize(
    ("verb", "code", "last"),
    [
        ("pause", 0, "run tk is PAUSED; resume it with `cairn runs resume tk`"),
        ("cancel", 1, "error: run 'tk' was cancelled"),
    ],
)
def test_run__a_pause_or_cancel_from_another_process_stops_it(project, verb, code, last):
    db = f"sqlite:///{project / 'cairn.db'}"
    argv = [sys.executable, "-m", "cairn", "run", "flows:ticker", "--run-id", "tk", "--db", db]
    with subprocess.Popen(
        argv, cwd=project, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as running:
        assert running.stderr is not None
        for line in running.stderr:
            if "tick#1 " in line:  # it is executing here
                break
        ok(project, "runs", verb, "tk")
        out, err = running.communicate(timeout=TIMEOUT)
    assert running.returncode == code, err
    assert err.splitlines()[-1].startswith(last)
    assert out == ""
    status = shown(project, "tk")["status"]
    assert status == ("PAUSED" if verb == "pause" else "CANCELLED")


def test_runs_show__what_a_waiting_run_waits_for_with_columns_and_progress(project):
    ok(project, "run", "flows:approve", "7", "--run-id", "ap")
    run = shown(project, "ap")
    assert run["status"] == "WAITING"
    assert run["waiting_for"] == "event:approval"
    assert run["waiting"]["kind"] == "event"
    assert run["waiting"]["name"] == "approval"
    assert run["waiting"]["until"] == run["wake_at"]
    assert run["columns"] == {"order": 7}
    assert run["progress"]["message"] == "asking for approval"
    table = ok(project, "runs", "show", "ap").stdout
    assert fact(table, "waiting for").startswith("event 'approval', times out")
    assert "asking for approval · 1/2 (50%)" in table
    listed = ok(project, "runs", "list").stdout
    assert "PROGRESS" in listed
    assert "asking for approval · 1/2 (50%)" in listed


def test_runs_show__sleeping_run_shows_its_wake_time(project):
    ok(project, "run", "flows:nap", "--run-id", "nap")
    run = shown(project, "nap")
    assert run["waiting"]["kind"] == "sleep"
    assert run["waiting"]["until"] == run["wake_at"]
    table = ok(project, "runs", "show", "nap").stdout
    assert fact(table, "waiting for").startswith("its sleep to end at")


def test_send__events_queue_fifo_and_a_repeated_key_is_ignored(project, workers):
    ok(project, "run", "flows:twice", "--enqueue", "--run-id", "tw")
    first = ok(project, "send", "tw", "n", "1", "--key", "k1")
    assert first.stdout.strip() == "event 'n' sent to run tw (PENDING)"
    ok(project, "send", "tw", "n", "2", "--key", "k1")  # same key: dropped
    facts = as_json(project, "send", "tw", "n", '"three"', "--key", "k2")
    assert facts == {
        "run_id": "tw",
        "event": "n",
        "status": "PENDING",
        "key": "k2",
        "awaited": False,
        "repeated": False,
        "waits_for": [],
        "note": None,  # a queued run may wait for it next: nothing to say
    }
    worker = Worker(project, "--db", f"sqlite:///{project / 'cairn.db'}")
    workers.append(worker)
    worker.wait_for("run tw COMPLETED")
    assert worker.terminate() == 0
    assert as_json(project, "runs", "show", "tw")["run"]["result"] == [1, "three"]
    again = ok(project, "send", "tw", "n", "2", "--key", "k1")  # a retry after the end
    assert again.stdout.strip() == (
        "event 'n' with key 'k1' was sent to run tw before (COMPLETED since); nothing new sent"
    )
    assert "already finished (COMPLETED)" in failed(project, "send", "tw", "n", "--key", "k3")


def test_send__a_name_the_run_does_not_wait_for_says_so_and_is_kept(project):
    ok(project, "run", "flows:approve", "7", "--run-id", "ap")
    proc = ok(project, "send", "ap", "aproval", '{"ok": true}')
    assert proc.stdout.strip() == (
        "run ap is not waiting for event 'aproval' (it waits for event 'approval'); "
        "the event is kept for a later wait"
    )
    facts = as_json(project, "send", "ap", "approval", '{"ok": true}')
    assert (facts["awaited"], facts["note"]) == (True, None)


def test_send__unknown_or_finished_run_is_one_line_exit_1(project):
    migrated(f"sqlite:///{project / 'cairn.db'}")  # as a worker would have
    assert "run 'nope' not found" in failed(project, "send", "nope", "approval")
    ok(project, "run", "flows:three", "1", "--run-id", "done")
    assert "run 'done' already finished (COMPLETED)" in failed(project, "send", "done", "x")


def test_tasks__list_show_and_submit_with_audit(project):
    ok(project, "run", "flows:review", "7", "--run-id", "rv")
    [task] = as_json(project, "tasks", "list")["tasks"]
    task_id = task["task_id"]
    assert (task["run_id"], task["title"], task["assignee"]) == ("rv", "Review order 7", "ann")
    assert task["data"] == {"order": 7, "amount": 12.5}
    assert task["due_at"] is not None
    assert task["form"]["required"] == ["ok"]
    assert shown(project, "rv")["waiting"]["task_id"] == task_id

    table = ok(project, "tasks", "show", task_id).stdout
    for text in ("Review order 7", "ann", '{"order": 7, "amount": 12.5}', "approve the order"):
        assert text in table
    assert f"cairn tasks submit {task_id} JSON" in table

    bad = failed(project, "tasks", "submit", task_id, '{"note": 5}')
    assert bad == "error: invalid submission: ok: required; note: 5 is not of type 'string'"
    assert "must be a JSON object" in failed(project, "tasks", "submit", task_id, "[1]", code=2)
    assert "is not valid JSON" in failed(project, "tasks", "submit", task_id, "{ok", code=2)
    assert as_json(project, "tasks", "show", task_id)["status"] == "open"

    done = ok(project, "tasks", "submit", task_id, '{"ok": true}', "--by", "bob")
    assert (
        done.stdout.strip()
        == f"task {task_id} submitted by bob; run rv goes on when a worker takes it"
    )
    after = as_json(project, "tasks", "show", task_id)
    assert (after["status"], after["submitted_by"], after["values"]) == (
        "submitted",
        "bob",
        {"ok": True},
    )
    assert after["submitted_at"] is not None
    assert fact(ok(project, "tasks", "show", task_id).stdout, "submitted by") == "bob"

    again = failed(project, "tasks", "submit", task_id, '{"ok": false}')
    assert again == f"error: human task {task_id!r} is not open (it is submitted)"
    assert ok(project, "tasks", "list").stdout.strip() == "no open tasks"
    assert [t["task_id"] for t in as_json(project, "tasks", "list", "--all")["tasks"]] == [task_id]
    assert len(as_json(project, "tasks", "list", "--status", "SUBMITTED")["tasks"]) == 1
    assert as_json(project, "tasks", "list", "--all", "--assignee", "bob")["tasks"] == []
    assert as_json(project, "tasks", "list", "--all", "--run", "other")["tasks"] == []


def test_tasks__bad_input_is_one_line_exit_1(project):
    migrated(f"sqlite:///{project / 'cairn.db'}")  # as a worker would have
    assert "human task 'nope' not found" in failed(project, "tasks", "show", "nope")
    assert "human task 'nope' not found" in failed(project, "tasks", "submit", "nope", "{}")
    assert "unknown task status 'done'" in failed(project, "tasks", "list", "--status", "done")
    assert "--by must not be empty" in failed(project, "tasks", "submit", "t", "{}", "--by", "")


def test_runs_pause_resume_cancel__on_parked_and_queued_runs(project):
    ok(project, "run", "flows:nap", "--run-id", "nap")
    paused = ok(project, "runs", "pause", "nap").stdout
    assert paused.strip() == "run nap PAUSED; resume it with `cairn runs resume nap`"
    assert shown(project, "nap")["waiting"]["kind"] == "resume"
    assert as_json(project, "runs", "pause", "nap")["status"] == "PAUSED"  # already: fine
    resumed = as_json(project, "runs", "resume", "nap")
    assert resumed["action"] == "resume"
    assert resumed["status"] not in ("PAUSED", "CANCELLED")
    again = ok(project, "runs", "resume", "nap").stdout
    assert "is not paused" in again
    cancel = as_json(project, "runs", "cancel", "nap")
    assert cancel["requested"] == "cancel"  # delivered by the worker that takes it
    assert fact(ok(project, "runs", "show", "nap").stdout, "requested").startswith("cancel")
    # A pause or resume now changes nothing: the cancel stands (both used to erase it).
    assert "a cancel is requested and stands" in ok(project, "runs", "pause", "nap").stdout
    assert as_json(project, "runs", "resume", "nap")["requested"] == "cancel"
    assert shown(project, "nap")["status"] != "PAUSED"

    queued = ok(project, "run", "flows:three", "1", "--enqueue").stdout.strip()
    line = ok(project, "runs", "cancel", queued).stdout.strip()
    assert line == f"run {queued} CANCELLED"
    assert shown(project, queued)["status"] == "CANCELLED"
    assert ok(project, "runs", "cancel", queued).stdout.strip() == line  # idempotent


@pytest.mark.parametrize("verb", ["cancel", "pause", "resume", "retry"])
def test_runs_verbs__a_finished_run_is_one_line_exit_1(project, verb):
    ok(project, "run", "flows:three", "1", "--run-id", "done")
    message = failed(project, "runs", verb, "done")
    assert "'done'" in message
    assert "COMPLETED" in message
    assert shown(project, "done")["status"] == "COMPLETED"


@pytest.mark.parametrize("verb", ["cancel", "pause", "resume"])
def test_runs_verbs__a_continued_run_names_the_newest_run_of_its_chain(project, verb):
    started = ok(project, "run", "flows:relay", "0", "--run-id", "r0")
    newest = shown(project, "r0")["continued_to"]
    # The run's last line says it as the refusals do, and shows the run it goes on as
    # (it said `follow: cairn runs show r0`, the run that had ended).
    last = started.stderr.splitlines()[-1]
    assert last.startswith(f"run r0 continued as new: {newest}; `cairn worker ")
    assert last.endswith(f"--wait to follow it here; check it with `cairn runs show {newest}`")
    # It ended before its first step: none will come ("no steps yet" said otherwise).
    assert "\nno steps\n" in ok(project, "runs", "show", "r0").stdout
    message = failed(project, "runs", verb, "r0")
    assert message == f"error: continued as new: {newest} (PENDING)"
    assert len(message) <= 80  # one line at 80 columns (it was 118 characters)
    assert shown(project, newest)["control"] is None


@pytest.mark.parametrize("verb", ["cancel", "pause", "resume", "retry", "restart"])
def test_runs_verbs__unknown_run_is_one_line_exit_1(project, verb):
    migrated(f"sqlite:///{project / 'cairn.db'}")  # as a worker would have
    assert failed(project, "runs", verb, "nope") == "error: run 'nope' not found"


def test_worker__continues_what_the_cli_steered(project, workers):
    """An event, a submitted task, a cancel and a retry: one worker carries each out."""
    ok(project, "run", "flows:approve", "3", "--run-id", "ap")
    ok(project, "run", "flows:review", "4", "--run-id", "rv")
    ok(project, "run", "flows:nap", "--run-id", "nap")
    assert cli(project, "run", "flows:fragile", "marker", "--run-id", "fr").returncode == 1
    ok(project, "send", "ap", "approval", '{"ok": true}')
    [task] = as_json(project, "tasks", "list")["tasks"]
    ok(project, "tasks", "submit", task["task_id"], '{"ok": false, "note": "too dear"}')
    ok(project, "runs", "cancel", "nap")
    (project / "marker").touch()
    retried = ok(project, "runs", "retry", "fr", "--by", "ada").stdout.strip()
    assert retried == (
        "run fr retried (execution 2): PENDING; a worker continues it from its failed step 'needs'"
    )

    worker = Worker(project, "--db", f"sqlite:///{project / 'cairn.db'}")
    workers.append(worker)
    wait_all(
        worker, ["run ap COMPLETED", "run rv COMPLETED", "run nap CANCELLED", "run fr COMPLETED"]
    )
    assert worker.terminate() == 0

    assert shown(project, "ap")["result"] == {"order": 3, "decision": {"ok": True}}
    assert shown(project, "rv")["result"] == {"ok": False, "note": "too dear"}
    assert shown(project, "nap")["status"] == "CANCELLED"
    fr = as_json(project, "runs", "show", "fr")
    assert fr["run"]["result"] == "fixed"
    # The failure the retry ran again stays, under execution 1, with its attempt.
    assert [(h["key"], h["status"], h["execution"], h["superseded"]) for h in fr["history"]] == [
        ("add#1", "completed", 1, False),
        ("needs#1", "failed", 1, True),
        ("needs#1", "completed", 2, False),
    ]
    assert [(a["key"], a["execution"], a["outcome"]) for a in fr["attempts"]] == [
        ("needs#1", 1, "failed")
    ]
    assert "no marker yet" in fr["attempts"][0]["traceback"]
    assert [(e["execution"], e["cause"], e["by"]) for e in fr["run"]["executions"]] == [
        (1, "start", None),
        (2, "retry", "ada"),
    ]
    table = ok(project, "runs", "show", "fr").stdout
    assert fact(table, "execution").startswith("2, after retry by ada at ")
    headings = [line for line in table.splitlines() if re.match(r"execution \d+, ", line)]
    assert [h.split(" at ")[0] for h in headings] == [
        "execution 1, started",  # the history's groups
        "execution 2, after retry by ada",
        "execution 1, started",  # the failed attempts' (only execution 1 has one)
    ]


def test_runs_restart_and_fork__print_the_new_run_id(project):
    ok(project, "run", "flows:three", "10", "--run-id", "t3")
    restarted = ok(project, "runs", "restart", "t3", "--by", "bob")
    new_id = restarted.stdout.strip()
    assert new_id and new_id != "t3"
    assert f"run {new_id} restarts run t3 with the same input" in restarted.stderr
    again = shown(project, new_id)
    assert (again["status"], again["args"], again["workflow"]) == ("PENDING", [10], "ctl.three")
    assert (again["restarted_from"], again["executions"][0]["by"]) == ("t3", "bob")
    assert fact(ok(project, "runs", "show", new_id).stdout, "restarted from").startswith(
        "t3, by bob at "
    )
    assert fact(ok(project, "runs", "show", "t3").stdout, "restarted as") == new_id

    forked = as_json(project, "runs", "fork", "t3", "--from-step", "3")
    assert forked["source"] == "t3"
    assert forked["from_step"] == 3
    assert forked["status"] == "PENDING"
    assert forked["by"]  # the user running the command, when no --by is given
    fork_run = shown(project, forked["run_id"])
    assert (fork_run["forked_from"], fork_run["forked_from_seq"]) == ("t3", 3)
    history = as_json(project, "runs", "show", forked["run_id"])["history"]
    assert [(h["seq"], h["key"], h["result"]) for h in history] == [
        (1, "add#1", 11),
        (2, "add#2", 12),
    ]


def test_runs_retry_restart_fork__a_bad_by_is_one_line_exit_1(project):
    assert cli(project, "run", "flows:fragile", "marker", "--run-id", "fr").returncode == 1
    for verb in (("retry", "fr"), ("restart", "fr"), ("fork", "fr", "--from-step", "1")):
        message = failed(project, "runs", *verb, "--by", "")
        assert message == "error: by must be a non-empty string, got ''"
    assert shown(project, "fr")["status"] == "FAILED"
    assert [r["run_id"] for r in as_json(project, "runs", "list")["runs"]] == ["fr"]


def test_runs_fork__bad_step(project):
    ok(project, "run", "flows:three", "1", "--run-id", "t3")
    message = failed(project, "runs", "fork", "t3", "--from-step", "9")
    assert message == (
        "error: run 't3' has no history entry 9 (its entries: 1 to 3; see `cairn runs show t3`)"
    )
    assert "--from-step must be a history seq" in failed(
        project, "runs", "fork", "t3", "--from-step", "0"
    )
    assert "run 'nope' not found" in failed(project, "runs", "fork", "nope", "--from-step", "1")
    failed(project, "runs", "fork", "t3", code=2)
    failed(project, "runs", "fork", "t3", "--from-step", "x", code=2)
    assert [r["run_id"] for r in as_json(project, "runs", "list")["runs"]] == ["t3"]


def test_queues__list_and_set_live_limits(project):
    migrated(f"sqlite:///{project / 'cairn.db'}")  # as a worker would have
    # -m flows declares queue "slow" (concurrency 1) when the database is opened.
    assert as_json(project, "queues", "list") == {
        "queues": [
            {
                "name": "slow",
                "concurrency": 1,
                "per_worker": None,
                "rate": None,
                "partition_concurrency": None,
            }
        ]
    }
    line = ok(project, "queues", "set", "slow", "--concurrency", "3", "--rate", "10/1m").stdout
    assert (
        line.strip()
        == "queue slow: concurrency 3, per worker none, rate 10/60s, per partition none"
    )
    changed = as_json(
        project, "queues", "set", "slow", "--per-worker", "2", "--concurrency", "none"
    )
    assert changed == {
        "name": "slow",
        "concurrency": None,
        "per_worker": 2,
        "rate": "10/60s",
        "partition_concurrency": None,
    }
    ok(project, "queues", "set", "bulk", "--partition-concurrency", "1")
    names = [q["name"] for q in as_json(project, "queues", "list")["queues"]]
    assert names == ["bulk", "slow"]
    table = ok(project, "queues", "list").stdout
    assert "10/60s" in table
    assert "PER PARTITION" in table


def test_queues_set__bad_input(project):
    migrated(f"sqlite:///{project / 'cairn.db'}")  # as a worker would have
    before = as_json(project, "queues", "list")
    assert "--concurrency must be a positive integer or none, got 0" in failed(
        project, "queues", "set", "slow", "--concurrency", "0"
    )
    assert "invalid --rate: 'fast'" in failed(project, "queues", "set", "slow", "--rate", "fast")
    assert "nothing to change" in failed(project, "queues", "set", "slow", code=2)
    assert "invalid limit 'lots'" in failed(
        project, "queues", "set", "slow", "--per-worker", "lots", code=2
    )
    assert as_json(project, "queues", "list") == before


def test_runs_show__pending_run_held_by_a_queue_limit(project, workers):
    ok(project, "run", "flows:limited", "gate-a", "--enqueue", "--run-id", "la")
    ok(project, "run", "flows:limited", "gate-b", "--enqueue", "--run-id", "lb")
    assert shown(project, "lb")["waiting"] == {"kind": "worker", "name": "slow", "until": None}
    worker = Worker(project, "--db", f"sqlite:///{project / 'cairn.db'}")
    workers.append(worker)
    worker.wait_for("run la (ctl.limited) started")
    reason = "queue 'slow': concurrency limit 1 reached"
    for _ in range(50):  # the worker records the reason at its next claim
        held = shown(project, "lb")
        if held["waiting"]["kind"] == "queue":
            break
    assert held["status"] == "PENDING"
    assert held["waiting"] == {"kind": "queue", "name": "slow", "until": None, "reason": reason}
    assert fact(ok(project, "runs", "show", "lb").stdout, "waiting for") == reason
    (project / "gate-a").touch()
    (project / "gate-b").touch()
    worker.wait_for("run lb COMPLETED")
    assert worker.terminate() == 0


def test_check__lists_what_the_modules_register(project):
    # Without --db the check never opens a database (with --db it replays runs in flight:
    # tests/process/test_deploy_check.py).
    listed = cairn_cmd(project, "check", "-m", "flows", "--json")
    assert listed.returncode == 0, listed.stderr
    facts = json.loads(listed.stdout)
    assert facts["modules"] == ["flows"]
    assert "ctl.approve" in [w["name"] for w in facts["workflows"]]
    assert {"name": "add", "function": "flows.add", "max_attempts": 3, "timeout": None} in facts[
        "steps"
    ]
    [queue] = facts["queues"]
    assert (queue["name"], queue["concurrency"]) == ("slow", 1)
    table = cairn_cmd(project, "check", "-m", "flows").stdout
    assert "ctl.limited" in table
    assert "ok: imported flows: 9 workflows, 4 steps, 1 queue, 0 schedules" in table
    assert not (project / "cairn.db").exists()  # check never opens the database


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (
            "dup",
            "duplicate name in module 'dup': workflow name 'same' is already registered by "
            "dup.first",
        ),
        ("broken_import", "cannot import module 'broken_import': RuntimeError: bad module"),
        ("ghost", "schedule 'ghost' starts workflow 'ghost', which no module registers"),
    ],
)
def test_check__problems_are_one_line_exit_1(project, module, message):
    proc = cairn_cmd(project, "check", "-m", module)
    assert proc.returncode == 1
    assert message in one_error_line(proc)
    assert proc.stdout == ""


def test_check__no_modules_configured(project):
    proc = cairn_cmd(project, "check")
    assert proc.returncode == 1
    assert "no workflow modules to check" in one_error_line(proc)


def test_init__starter_project_runs_with_cairn_run_and_worker(tmp_path, workers):
    proc = cairn_cmd(tmp_path, "init", "shop")
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "shop"
    assert sorted(p.name for p in project.iterdir()) == [
        "README.md",
        "pyproject.toml",
        "workflows.py",
    ]
    assert "cairn run workflows:greet Ada" in proc.stdout
    readme = (project / "README.md").read_text()
    assert "cairn run workflows:greet Ada" in readme
    assert "cairn worker" in readme

    # No --db or -m from here on: pyproject.toml's [tool.cairn] supplies both.
    checked = cairn_cmd(project, "check")
    assert checked.returncode == 0, checked.stderr
    assert "1 workflow, 2 steps" in checked.stdout
    started = cairn_cmd(project, "run", "workflows:greet", "Ada", "--run-id", "g1")
    assert started.returncode == 0, started.stderr
    assert "run g1 is SLEEPING until" in started.stderr
    assert "… sleeping before delivery · 1/2 (50%)" in started.stderr
    assert (project / "cairn.db").exists()

    # The test Worker always passes `-m flows`: let that module be the starter's.
    (project / "flows.py").write_text("from workflows import *  # noqa: F403\n")
    worker = Worker(project)
    workers.append(worker)
    worker.wait_for("run g1 COMPLETED")
    assert worker.terminate() == 0
    result = json.loads(cairn_cmd(project, "runs", "show", "g1", "--json").stdout)["run"]["result"]
    assert result == "delivered: Hello, Ada!"


def test_init__never_overwrites(tmp_path):
    (tmp_path / "README.md").write_text("mine\n")
    proc = cairn_cmd(tmp_path, "init")
    assert proc.returncode == 1
    assert "README.md' already exists; cairn init never overwrites files" in one_error_line(proc)
    assert (tmp_path / "README.md").read_text() == "mine\n"
    assert not (tmp_path / "pyproject.toml").exists()
    (tmp_path / "afile").write_text("")
    assert "exists and is not a directory" in one_error_line(cairn_cmd(tmp_path, "init", "afile"))


def test_init__module_and_url_from_options(tmp_path):
    proc = cairn_cmd(tmp_path, "init", "p", "-m", "orders", "--db", "sqlite:///orders.db")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "p" / "orders.py").exists()
    text = (tmp_path / "p" / "pyproject.toml").read_text()
    assert 'modules = ["orders"]' in text
    assert 'url = "sqlite:///orders.db"' in text
    bad = cairn_cmd(tmp_path, "init", "q", "-m", "shop.flows")
    assert bad.returncode == 1
    assert "must be a Python identifier" in one_error_line(bad)
    assert not (tmp_path / "q").exists()


def test_runs_list__a_run_that_keeps_waking_without_progress_is_flagged(project):
    ok(project, "run", "flows:approve", "7", "--run-id", "sp")
    ok(project, "run", "flows:approve", "8", "--run-id", "calm")
    # As a worker leaves a run it saw wake 14 times in a minute with nothing to take.
    with contextlib.closing(sqlite3.connect(project / "cairn.db")) as db, db:
        db.execute("UPDATE runs SET futile_wakes = 14 WHERE run_id = 'sp'")

    proc = ok(project, "runs", "list")

    [flagged] = [line for line in proc.stdout.splitlines() if line.startswith("sp ")]
    assert "WAITING spinning" in flagged
    assert "spinning" not in next(line for line in proc.stdout.splitlines() if "calm" in line)
    assert proc.stderr.strip().startswith("run sp keeps waking without progress (14 times")
    assert "; event 'approval' until " in proc.stderr
    assert proc.stderr.strip().endswith("; see `cairn runs show sp`")
    listed = {r["run_id"]: r for r in as_json(project, "runs", "list")["runs"]}
    assert (listed["sp"]["futile_wakes"], listed["calm"]["futile_wakes"]) == (14, 0)
    assert shown(project, "sp")["waiting"]["spinning"].startswith("keeps waking")
