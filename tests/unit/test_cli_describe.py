from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from cairn.authoring.registry import Registry
from cairn.authoring.schedules import define
from cairn.cli import check, describe, output, scaffold
from cairn.models import SPINNING_AFTER, HistoryEntry
from cairn.representation import words
from cairn.runtime import blocking, leases
from cairn.store.records import RunRecord, WorkerRecord

NOW = 1_000_000.0


def run(status: str, **fields) -> RunRecord:
    return RunRecord(
        run_id="r1",
        workflow="w",
        status=status,
        args="{}",
        created_at=NOW,
        updated_at=NOW,
        **fields,
    )


def test_waiting__event_with_timeout():
    found = blocking.waiting(
        run("WAITING", waiting_for="event:approval", wake_at=NOW + 3600), now=NOW
    )
    assert found == {"kind": "event", "name": "approval", "until": NOW + 3600}
    text = words.waiting_text(found, now=NOW)
    assert text.startswith("event 'approval', times out ")
    assert text.endswith("(in 1h00m)")
    assert describe.follow_up(run("WAITING"), found) == (
        "send it with `cairn send r1 approval JSON`"
    )


def test_waiting__human_task_names_the_task():
    record = run("WAITING", waiting_for="task:review")
    found = blocking.waiting(record, now=NOW, task_id="t9")
    assert found == {"kind": "task", "name": "review", "until": None, "task_id": "t9"}
    assert words.waiting_text(found, now=NOW) == "human task 'review' (task t9)"
    assert "cairn tasks submit t9 JSON" in describe.follow_up(record, found)


@pytest.mark.parametrize("channel", ["hook:cb", "child:billing"])
def test_waiting__hooks_and_children(channel):
    found = blocking.waiting(run("WAITING", waiting_for=channel), now=NOW)
    assert found is not None
    assert found["kind"] == channel.partition(":")[0]
    assert repr(channel.partition(":")[2]) in words.waiting_text(found, now=NOW)


def test_waiting__a_child_is_named_and_what_moves_it_on_is_the_childs():
    # Before, "child run of 'claims.review'" without the child's id, and no hint.
    record = run("WAITING", waiting_for="child:claims.review", waits_on='["child:r1/c#1"]')
    found = blocking.waiting(record, now=NOW)
    assert found == {"kind": "child", "name": "claims.review", "until": None, "child_id": "r1/c#1"}
    assert blocking.reason(record, now=NOW) == "child run of 'claims.review' (r1/c#1)"
    assert "cairn runs show r1/c#1" in describe.follow_up(record, found)
    task = {"kind": "task", "name": "approve", "until": None, "task_id": "t9"}
    found["child"] = {"run_id": "r1/c#1", "status": "WAITING", "waiting": task}
    assert words.waiting_text(found, now=NOW) == (
        "child run of 'claims.review' (r1/c#1), which waits for human task 'approve' (task t9)"
    )
    assert "cairn tasks submit t9 JSON" in describe.follow_up(record, found)
    found["child"] = {"run_id": "r1/c#1", "status": "RUNNING", "waiting": None}
    assert words.waiting_text(found, now=NOW).endswith("(r1/c#1), which is RUNNING")


def test_waiting__a_step_sent_to_a_step_queue_names_the_queue():
    # Before, a run parked on a remote attempt read as "waiting for a worker to take it".
    record = run("WAITING", waiting_for="step:train@gpu")
    found = blocking.waiting(record, now=NOW)
    assert found == {"kind": "step", "name": "train@gpu", "until": None}
    assert words.waiting_text(found, now=NOW) == "a worker of step queue 'gpu' to run step 'train'"
    assert "cairn worker --step-queue gpu" in describe.follow_up(record, found)


def test_waiting__a_step_queue_no_live_worker_serves_says_so():
    found = {"kind": "step", "name": "train@gpu", "until": None, "no_live_worker": True}
    assert words.waiting_text(found, now=NOW) == (
        "a worker of step queue 'gpu' to run step 'train' (no live worker serves it)"
    )


def test_serves_step_queue__only_live_workers_count_and_a_silent_row_may_serve():
    def worker(queues: str | None, beat: float = NOW - 1) -> WorkerRecord:
        return WorkerRecord("w", "h", 1, 0.0, beat, queues=queues, lease=10.0)

    gpu = leases.queues_column(None, ["gpu"])
    assert leases.serves_step_queue([worker(gpu)], "gpu", NOW)
    assert not leases.serves_step_queue([worker(gpu)], "cpu", NOW)
    assert not leases.serves_step_queue([worker(gpu, beat=NOW - 11)], "gpu", NOW)  # silent
    assert not leases.serves_step_queue([worker(gpu, beat=0.0)], "gpu", NOW)  # dead
    assert not leases.serves_step_queue([], "gpu", NOW)
    # A row that does not say which step queues it serves (an older cairn) may serve any.
    assert leases.serves_step_queue([worker(None)], "gpu", NOW)


def test_waiting__a_due_wait_is_for_a_worker():
    # The event came (or the run was resumed): it is due, and a worker replays it.
    found = blocking.waiting(run("WAITING", waiting_for="event:x", wake_at=NOW - 1), now=NOW)
    assert found is not None
    assert found["kind"] == "worker"
    assert "cairn worker" in words.waiting_text(found, now=NOW)


def test_waiting__pending_run_held_by_a_queue_limit():
    held = "queue 'mail': concurrency limit 2 reached"
    found = blocking.waiting(run("PENDING", queue="mail", waiting_for=held), now=NOW)
    assert found == {"kind": "queue", "name": "mail", "until": None, "reason": held}
    assert words.waiting_text(found, now=NOW) == held


@pytest.mark.parametrize(
    ("status", "was"), [("SLEEPING", None), ("SLEEPING", "retry:add"), ("WAITING", "event:x")]
)
def test_waiting__a_due_parked_run_held_by_a_queue_limit(status, was):
    # A woken run takes a place in its queue again: the claim that held it back says why,
    # over what it waited for before.
    held = "queue 'mail': concurrency limit 2 reached"
    record = run(status, queue="mail", waiting_for=held, wake_at=NOW - 1)
    found = blocking.waiting(record, now=NOW)
    assert found == {"kind": "queue", "name": "mail", "until": None, "reason": held}
    assert words.waiting_text(found, now=NOW) == held
    before = blocking.waiting(run(status, queue="mail", waiting_for=was), now=NOW)
    assert before is not None and before["kind"] != "queue"


def test_waiting__pending_delayed_or_for_a_worker():
    delayed = blocking.waiting(run("PENDING", wake_at=NOW + 60), now=NOW)
    assert delayed is not None
    assert delayed["kind"] == "delay"
    assert "(in 1m00s)" in words.waiting_text(delayed, now=NOW)
    queued = blocking.waiting(run("PENDING", queue="mail"), now=NOW)
    assert queued is not None
    text = words.waiting_text(queued, now=NOW)
    assert text == "a worker serving queue 'mail' to take it (`cairn worker`)"


def test_waiting__a_worker_nobody_live_can_be():
    found = blocking.waiting(run("PENDING"), now=NOW)
    assert found is not None
    found["workers_know"] = ["shop.checkout"]  # what `cairn runs show` adds
    text = words.waiting_text(found, now=NOW)
    assert text == "a worker that imports its workflow (live workers know: shop.checkout)"


def test_known_workflows__of_live_workers_only_and_none_when_one_does_not_say():
    def worker(heartbeat_at: float, workflows: str | None) -> WorkerRecord:
        return WorkerRecord("w", "host", 1, NOW, heartbeat_at, workflows=workflows)

    assert leases.known_workflows([]) is None  # nobody to ask: queuing for later is fine
    assert leases.known_workflows([worker(NOW, '["a"]'), worker(0, '["b"]')]) == {"a"}
    assert leases.known_workflows([worker(NOW, '["a"]'), worker(NOW, None)]) is None
    assert leases.known_workflows([worker(NOW, "[]")]) == set()  # `cairn run` takes nothing


def test_waiting__sleeping_paused_and_none():
    sleeping = blocking.waiting(run("SLEEPING", wake_at=NOW + 5), now=NOW)
    assert sleeping == {"kind": "sleep", "name": None, "until": NOW + 5}
    paused = blocking.waiting(run("PAUSED"), now=NOW)
    assert paused is not None
    assert words.waiting_text(paused, now=NOW, run_id="r1") == (
        "`cairn runs resume r1` (it is paused)"
    )
    for status in ("RUNNING", "COMPLETED", "FAILED", "CANCELLED", "CONTINUED"):
        assert blocking.waiting(run(status), now=NOW) is None


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        ({"message": "rows", "current": 40, "total": 100}, "rows · 40/100 (40%)"),
        ({"message": "rows", "current": 2.5, "total": None}, "rows · 2.5"),
        ({"message": "just a\nmessage"}, "just a message"),
        ({"message": "", "current": 1, "total": 4}, "1/4 (25%)"),
        (None, ""),
    ],
)
def test_progress_text(progress, text):
    assert words.progress_text(progress) == text


def test_scaffold__files_are_valid_and_name_the_module(tmp_path):
    planned = scaffold.files(tmp_path / "My Shop", module="flows", url="sqlite:///shop.db")
    by_name = {path.name: text for path, text in planned.items()}
    assert set(by_name) == {"pyproject.toml", "flows.py", "README.md"}
    config = tomllib.loads(by_name["pyproject.toml"])
    assert config["project"]["name"] == "my-shop"
    assert config["tool"]["cairn"] == {"modules": ["flows"], "url": "sqlite:///shop.db"}
    compile(by_name["flows.py"], "flows.py", "exec")
    assert "cairn run flows:greet" in by_name["README.md"]
    assert "cairn worker" in by_name["README.md"]


def test_scaffold__project_name_fallback():
    assert scaffold.project_name(Path("/")) == "cairn-project"


def test_check__schedule_of_an_unknown_workflow_is_a_problem():
    registry = Registry()
    registry.add_schedule(define("ghost", every="1h"))
    assert check.problems(registry) == [
        "schedule 'ghost' starts workflow 'ghost', which no module registers"
    ]


def test_input_text__reads_as_the_call_clipped_and_says_what_was_omitted() -> None:
    assert words.input_text({"args": [1, "a"], "kwargs": {"retry": True}}) == '(1, "a", retry=true)'
    assert words.input_text({"args": [], "kwargs": {}}) == "()"
    assert words.input_text(None) == ""  # a sleep, or a step recorded before inputs were kept
    clipped = words.input_text({"args": ["x" * 100], "kwargs": {}}, width=20)
    assert len(clipped) == 20 and clipped.endswith("…")
    assert words.input_text({"omitted": "too big"}) == "(omitted: too big)"


def test_progress_text__a_completed_run_shows_its_progress_as_final():
    progress = {"message": "sleeping before delivery", "current": 1, "total": 2}

    assert words.progress_text(progress, "COMPLETED") == "done (last: sleeping before delivery)"
    assert words.progress_percent(progress, "COMPLETED") == 100
    assert words.progress_text(progress, "FAILED") == "sleeping before delivery · 1/2 (50%)"
    assert words.progress_percent(progress, "FAILED") == 50  # where it stopped
    assert words.progress_text({"current": 1, "total": 2}, "COMPLETED") == "done"


def test_history_table__a_hidden_hook_token_reads_as_on_the_dashboard():
    entry = HistoryEntry(
        seq=2,
        kind="step",
        name="notify",
        status="completed",
        attempts=1,
        started_at=datetime.fromtimestamp(NOW, UTC),
        finished_at=datetime.fromtimestamp(NOW + 1, UTC),
        result="[bold]sent[/bold]",
        key="notify#1",
        input={"args": ["https://x/hooks/[hook token]"], "kwargs": {}},
    )
    console = Console(record=True, width=200)

    console.print(output.history_table([entry]))

    text = console.export_text()
    assert '("https://x/hooks/[hook token]")' in text  # not read as rich markup
    assert '"[bold]sent[/bold]"' in text


def test_blocking__a_run_that_keeps_waking_without_progress_says_so():
    flagged = run("WAITING", waiting_for="event:approval", futile_wakes=SPINNING_AFTER + 1)
    quiet = run("WAITING", waiting_for="event:approval", futile_wakes=SPINNING_AFTER)

    reason = blocking.reason(flagged, now=NOW)
    found = blocking.waiting(flagged, now=NOW)

    assert reason is not None and reason.startswith(
        f"keeps waking without progress ({SPINNING_AFTER + 1} times in the minute to "
    )
    assert reason.endswith("; event 'approval'")
    assert found is not None
    assert words.waiting_text(found, now=NOW).startswith(
        "event 'approval' — but it keeps waking without progress"
    )
    assert blocking.reason(quiet, now=NOW) == "event 'approval'"
    running = blocking.waiting(run("RUNNING", futile_wakes=SPINNING_AFTER + 1), now=NOW)
    assert running is not None and running["kind"] == "spinning"
    assert words.waiting_text(running, now=NOW).startswith(
        "nothing it can take: it keeps waking without progress"
    )
    assert blocking.reason(run("COMPLETED", futile_wakes=50), now=NOW) is None


def test_blocking__the_events_a_waiting_run_takes():
    gathered = run("WAITING", waits_on='["event:a", "task:t1", "event:b"]')
    older = run("WAITING", waiting_for="event:go")  # parked before its channels were kept

    assert blocking.awaited_events(gathered) == ["a", "b"]
    assert blocking.awaited_events(older) == ["go"]
    assert blocking.awaited_events(run("SLEEPING", waits_on='["event:a"]')) == []
    assert blocking.channels_in_words(["event:a", "hook:ff", "task:t1", "child:c"]) == (
        "event 'a'",
        "a hook call",
        "human task t1",
        "child run 'c'",
    )


def test_history_table__at_80_columns_each_entry_keeps_to_one_line():
    # Before the table was fitted, rich squeezed INPUT and OUTCOME to one letter each and
    # wrapped every value a letter per line down the screen.
    started = datetime.fromtimestamp(NOW, UTC)
    entries = [
        HistoryEntry(
            seq=seq,
            kind="step",
            name="fetch_order_details",
            status="completed",
            attempts=1,
            started_at=started,
            finished_at=started,
            result={"order": "o-1", "items": [{"sku": "A", "qty": 2}], "note": "x" * 60},
            key=f"fetch_order_details#{seq}",
            input={"args": ["o-1", [{"sku": "A", "qty": 2}]], "kwargs": {}},
        )
        for seq in (1, 2, 3)
    ]
    console = Console(record=True, width=80)

    console.print(output.history_table(entries))

    lines = console.export_text().rstrip("\n").split("\n")
    assert len(lines) == 4  # the heading and one line per entry
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].split()[:4] == ["SEQ", "KIND", "KEY", "STATUS"]
    assert "OUTCOME" in lines[0]
    assert lines[1].split()[2] == "fetch_order_details#1"  # a key is never cut short here
    assert '{"order": "o-1"' in lines[1]


def test_waiting__a_workflow_named_after_a_scripts_main_module():
    # A pyworkflow user's `@workflow()` in a script started as `python app.py` is
    # '__main__.greet' there, and 'app.greet' in `cairn worker -m app`.
    found = blocking.waiting(run("PENDING"), now=NOW)
    assert found is not None
    found["workers_know"] = ["app.greet"]
    found["workflow"] = "__main__.greet"
    text = words.waiting_text(found, now=NOW)
    assert text == (
        "a worker that imports its workflow (live workers know: app.greet); "
        "'__main__.greet' was named in a script run as __main__: name it, "
        '@cairn.workflow(name="...")'
    )
