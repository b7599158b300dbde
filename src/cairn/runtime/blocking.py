"""Why a run is not moving: the facts (`waiting`) and one line for people (`reason`).

Read from a stored run alone, never from the database, so listing runs stays one query.
`cairn runs show`, `cairn run`, `RunSummary.waiting_for` and the dashboard share it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from cairn.blobs import reference
from cairn.models import SPINNING_AFTER, RunStatus
from cairn.store.records import RunRecord

# What a WAITING run's `waiting_for` ("event:approval") names, in words.
KINDS = {
    "event": "event",
    "hook": "hook",
    "task": "human task",
    "child": "child run of",
    "step": "step",  # an attempt sent to a step queue: name is "STEP@QUEUE"
}
# The start of a PENDING run's `waiting_for` when a lost database session holds its row
# (see store/postgres/sessions.py).
LOCKED_BY = "locked by a session of "
# Channels of messages (`runs.waits_on`, "event:approval") and their words.
_CHANNELS = {"event": "event {!r}", "task": "human task {}", "child": "child run {!r}"}


def channels_in_words(channels: Iterable[str]) -> tuple[str, ...]:
    """What waits on these channels take, for people: `("event 'approval'", "a hook call")`."""
    words = []
    for channel in channels:
        kind, _, name = channel.partition(":")
        words.append("a hook call" if kind == "hook" else _CHANNELS.get(kind, "{}").format(name))
    return tuple(words)


def awaited_events(run: RunRecord) -> list[str]:
    """The names of the events the open waits of a WAITING run take (none otherwise)."""
    if run.status != RunStatus.WAITING.value:
        return []
    if run.waits_on is None:  # parked before its channels were kept: what it named
        kind, sep, name = (run.waiting_for or "").partition(":")
        return [name] if sep and kind == "event" else []
    channels = json.loads(run.waits_on)
    return [c[len("event:") :] for c in channels if c.startswith("event:")]


def awaited_child(run: RunRecord) -> str | None:
    """The id of the child run a WAITING run waits on, from its wait's channel; else None.

    `waiting_for` names the child's workflow ("child:claims.review"), `waits_on` the
    channel its end is sent on ("child:RUN_ID"): read from the row, like the rest here.
    """
    if run.status != RunStatus.WAITING.value or run.waits_on is None:
        return None
    for channel in json.loads(run.waits_on):
        kind, _, name = channel.partition(":")
        if kind == "child" and name:
            return str(name)
    return None


def spinning(run: RunRecord) -> str | None:
    """One line if the unfinished run keeps waking without progress, else None."""
    if run.futile_wakes <= SPINNING_AFTER or RunStatus(run.status).finished:
        return None
    return (
        f"keeps waking without progress ({run.futile_wakes} times in the minute to "
        f"{_utc(run.updated_at)})"
    )


def waiting(run: RunRecord, *, now: float, task_id: str | None = None) -> dict[str, Any] | None:
    """What holds the run, as JSON-ready facts; None when nothing does (running or finished).

    `kind` is one of sleep, retry (a step's backoff, parked: `name` is the step), event,
    hook, task, child (a WAITING or SLEEPING run), queue (a PENDING run, or a parked one
    now due, held back by a queue limit, or handed back by a worker that lacks its key
    or version: `reason` says which), locked (a PENDING run
    whose row a lost database session still locks: `reason` names the session's worker
    and since when), blobs (an attempt waits for the blob store to take a value, RUNNING
    or, for a step queue's attempt, WAITING: `reason` is the store's refusal), delay (a
    start delay),
    worker (due, for a worker to take) or resume (PAUSED). `until` is the wake time or the
    wait's timeout (epoch seconds), `task_id` the open human task, `child_id` the child
    run waited on (None for a run parked before its channels were kept). A run that keeps
    waking without progress has `spinning`, the line saying so (and kind "spinning"
    while it executes, between two wake-ups).
    """
    found = _waiting(run, now=now, task_id=task_id)
    flag = spinning(run)
    if flag is None:
        return found
    if found is None:  # executing right now, between two wake-ups
        found = {"kind": "spinning", "name": None, "until": None}
    return {**found, "spinning": flag}


def held_by_queue(run: RunRecord) -> dict[str, Any] | None:
    """A run held back by a limit of its queue, as the claim that passed it over said."""
    reason = run.waiting_for or ""
    if run.queue is None or not reason.startswith(f"queue {run.queue!r}: "):
        return None
    return {"kind": "queue", "name": run.queue, "until": None, "reason": reason}


def _waiting(run: RunRecord, *, now: float, task_id: str | None) -> dict[str, Any] | None:
    status = RunStatus(run.status)
    if status in (RunStatus.SLEEPING, RunStatus.WAITING):
        # Woken, it takes a place in its queue again: a claim may have held it back.
        held = held_by_queue(run)
        if held is not None:
            return held
    if status is RunStatus.SLEEPING:
        kind, sep, name = (run.waiting_for or "").partition(":")
        if sep and kind == "retry":  # a step's retry backoff, parked
            return {"kind": "retry", "name": name, "until": run.wake_at}
        return {"kind": "sleep", "name": None, "until": run.wake_at}
    if status is RunStatus.PAUSED:
        return {"kind": "resume", "name": None, "until": None}
    if status is RunStatus.WAITING:
        kind, sep, name = (run.waiting_for or "").partition(":")
        if kind == _BLOBS:  # its step queue's worker waits for the blob store
            return _blob_store(run)
        if run.waiting_for and kind not in KINDS:
            # A woken run a worker handed back (it lacks the key or the version), parked
            # again: the note says what it waits for, as on a PENDING run.
            return {"kind": "queue", "name": run.queue, "until": None, "reason": run.waiting_for}
        due = run.wake_at is not None and run.wake_at <= now
        if not sep or kind not in KINDS or due:
            # Resumed from a pause, or its message came or it timed out: a worker replays it.
            return {"kind": "worker", "name": run.queue, "until": run.wake_at}
        found: dict[str, Any] = {"kind": kind, "name": name, "until": run.wake_at}
        if kind == "task":
            found["task_id"] = task_id
        elif kind == "child":
            found["child_id"] = awaited_child(run)
        return found
    if status is RunStatus.PENDING:
        if run.waiting_for and run.waiting_for.startswith(LOCKED_BY):
            return {"kind": "locked", "name": None, "until": None, "reason": run.waiting_for}
        # A note of the blob store left by an attempt that stopped: not what holds it now.
        if run.waiting_for and not run.waiting_for.startswith(reference.WAITING):
            return {"kind": "queue", "name": run.queue, "until": None, "reason": run.waiting_for}
        if run.wake_at is not None and run.wake_at > now:
            return {"kind": "delay", "name": None, "until": run.wake_at}
        return {"kind": "worker", "name": run.queue, "until": None}
    if status is RunStatus.RUNNING and run.waiting_for is not None:
        if run.waiting_for.startswith(reference.WAITING):
            return _blob_store(run)
    return None


_BLOBS = reference.WAITING.partition(":")[0]


def _blob_store(run: RunRecord) -> dict[str, Any]:
    """A run whose attempt waits for the blob store to take a value (the store's refusal)."""
    reason = str(run.waiting_for)[len(reference.WAITING) :].strip()
    return {"kind": "blobs", "name": None, "until": None, "reason": reason}


def reason(run: RunRecord, *, now: float) -> str | None:
    """One line saying what the run waits for ("event 'approve' until 14:00:00Z"), or None.

    None for a run that is executing or finished, and for a queued run that is simply due
    (a worker will take it). A run that keeps waking without progress says so first.
    """
    found = waiting(run, now=now)
    if found is None:
        return None
    text = _reason(found, now=now)
    flag = found.get("spinning")
    if flag is None:
        return text
    return flag if text is None else f"{flag}; {text}"


def _reason(found: dict[str, Any], *, now: float) -> str | None:
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
    if kind == "locked":
        return str(found["reason"])
    if kind == "blobs":
        return f"the blob store: {found['reason']}"
    if kind == "delay":
        return f"start delayed until {_utc(until)}"
    if kind in ("worker", "spinning"):
        return None
    text = f"{KINDS[kind]} {name!r}"
    if kind == "child" and found.get("child_id"):
        text += f" ({found['child_id']})"
    return text if until is None else f"{text} until {_utc(until)}"


def _utc(moment: float | None) -> str:
    if moment is None:
        return "?"
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
