"""A run's state in plain words: what it waits for, how far it got, and what to do next.

Shared by `cairn runs show`, `cairn runs list` and `cairn run`; it reads records, never
the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.cli import output
from cairn.models import RunStatus
from cairn.store.records import RunRecord

# What a WAITING run's `waiting_for` ("event:approval") names, in words.
_KINDS = {"event": "event", "hook": "hook", "task": "human task", "child": "child run of"}


def waiting(run: RunRecord, *, now: float, task_id: str | None = None) -> dict[str, Any] | None:
    """What holds the run, as JSON-ready facts; None when nothing does (running or finished).

    `kind` is one of sleep, event, hook, task, child (a WAITING or SLEEPING run), queue (a
    PENDING run held back by a queue limit, `reason` says which), delay (a start delay),
    worker (due, for a worker to take) or resume (PAUSED). `cairn runs show` adds
    `workers_know` to a worker wait when live workers exist and none executes the run's
    workflow: the workflows they do execute. `until` is the wake time or the
    wait's timeout (epoch seconds), `task_id` the open human task.
    """
    status = RunStatus(run.status)
    if status is RunStatus.SLEEPING:
        return {"kind": "sleep", "name": None, "until": run.wake_at}
    if status is RunStatus.PAUSED:
        return {"kind": "resume", "name": None, "until": None}
    if status is RunStatus.WAITING:
        kind, sep, name = (run.waiting_for or "").partition(":")
        due = run.wake_at is not None and run.wake_at <= now
        if not sep or kind not in _KINDS or due:
            # Resumed from a pause, or its message came or it timed out: a worker replays it.
            return {"kind": "worker", "name": run.queue, "until": run.wake_at}
        found: dict[str, Any] = {"kind": kind, "name": name, "until": run.wake_at}
        if kind == "task":
            found["task_id"] = task_id
        return found
    if status is RunStatus.PENDING:
        if run.waiting_for:
            return {"kind": "queue", "name": run.queue, "until": None, "reason": run.waiting_for}
        if run.wake_at is not None and run.wake_at > now:
            return {"kind": "delay", "name": None, "until": run.wake_at}
        return {"kind": "worker", "name": run.queue, "until": None}
    return None


def waiting_text(found: Mapping[str, Any], *, now: float, run_id: str = "RUN_ID") -> str:
    """`event 'approval' (times out 2025-06-01 12:00:00, in 6d23h)` and the like."""
    kind, name, until = found["kind"], found.get("name"), found.get("until")
    if kind == "sleep":
        return f"its sleep to end at {output.when(until)}{_in(until, now)}"
    if kind == "resume":
        return f"`cairn runs resume {run_id}` (it is paused)"
    if kind == "queue":
        return str(found.get("reason") or f"a free slot on queue {name!r}")
    if kind == "delay":
        return f"its start delay to end at {output.when(until)}{_in(until, now)}"
    if kind == "worker":
        where = f" serving queue {name!r}" if name else ""
        if "workers_know" in found:  # live workers exist, and none executes this workflow
            know = ", ".join(found["workers_know"]) or "no workflows"
            return f"a worker{where} that imports its workflow (live workers know: {know})"
        return f"a worker{where} to take it (`cairn worker`)"
    text = f"{_KINDS[kind]} {name!r}"
    if kind == "task" and found.get("task_id"):
        text += f" (task {found['task_id']})"
    if until is not None:
        verb = "due" if kind == "task" else "expires" if kind == "hook" else "times out"
        text += f", {verb} {output.when(until)}{_in(until, now)}"
    return text


def _in(until: float | None, now: float) -> str:
    if until is None:
        return ""
    left = until - now
    return f" (in {output.seconds(left)})" if left > 0 else " (due now)"


def follow_up(run: RunRecord, found: Mapping[str, Any] | None) -> str:
    """The command that moves a parked run on, for the last line of `cairn run`."""
    kind = None if found is None else found["kind"]
    if kind == "event" and found is not None:
        return f"send it with `cairn send {run.run_id} {found['name']} JSON`"
    if kind == "task" and found is not None:
        task = found.get("task_id") or "TASK_ID"
        return f"submit it with `cairn tasks submit {task} JSON` (see `cairn tasks show {task}`)"
    if kind == "resume":
        return f"resume it with `cairn runs resume {run.run_id}`"
    if kind == "hook":
        return "it goes on when the hook is called"
    return ""
