"""Why a run is not moving: the facts (`waiting`) and one line for people (`reason`).

Read from a stored run alone, never from the database, so listing runs stays one query.
`cairn runs show`, `cairn run`, `RunSummary.waiting_for` and the dashboard share it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cairn.models import RunStatus
from cairn.store.records import RunRecord

# What a WAITING run's `waiting_for` ("event:approval") names, in words.
KINDS = {"event": "event", "hook": "hook", "task": "human task", "child": "child run of"}


def waiting(run: RunRecord, *, now: float, task_id: str | None = None) -> dict[str, Any] | None:
    """What holds the run, as JSON-ready facts; None when nothing does (running or finished).

    `kind` is one of sleep, retry (a step's backoff, parked: `name` is the step), event,
    hook, task, child (a WAITING or SLEEPING run), queue (a
    PENDING run held back by a queue limit, `reason` says which), delay (a start delay),
    worker (due, for a worker to take) or resume (PAUSED). `until` is the wake time or the
    wait's timeout (epoch seconds), `task_id` the open human task.
    """
    status = RunStatus(run.status)
    if status is RunStatus.SLEEPING:
        kind, sep, name = (run.waiting_for or "").partition(":")
        if sep and kind == "retry":  # a step's retry backoff, parked
            return {"kind": "retry", "name": name, "until": run.wake_at}
        return {"kind": "sleep", "name": None, "until": run.wake_at}
    if status is RunStatus.PAUSED:
        return {"kind": "resume", "name": None, "until": None}
    if status is RunStatus.WAITING:
        kind, sep, name = (run.waiting_for or "").partition(":")
        due = run.wake_at is not None and run.wake_at <= now
        if not sep or kind not in KINDS or due:
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


def reason(run: RunRecord, *, now: float) -> str | None:
    """One line saying what the run waits for ("event 'approve' until 14:00:00Z"), or None.

    None for a run that is executing or finished, and for a queued run that is simply due
    (a worker will take it).
    """
    found = waiting(run, now=now)
    if found is None:
        return None
    kind, name, until = found["kind"], found.get("name"), found.get("until")
    if kind == "sleep":
        return f"sleeping until {_utc(until)}"
    if kind == "retry":
        left = "" if until is None else f" in {max(0.0, until - now):.0f} s"
        return f"retrying {name!r}{left} (at {_utc(until)})"
    if kind == "resume":
        return "paused"
    if kind == "queue":
        return str(found.get("reason") or f"queue {name!r} is full")
    if kind == "delay":
        return f"start delayed until {_utc(until)}"
    if kind == "worker":
        return None
    text = f"{KINDS[kind]} {name!r}"
    return text if until is None else f"{text} until {_utc(until)}"


def _utc(moment: float | None) -> str:
    if moment is None:
        return "?"
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
