"""A run's state in plain words: what it waits for, how far it got, and what to do next.

Shared by `cairn runs show`, `cairn runs list` and `cairn run`; it reads records, never
the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.cli import output
from cairn.runtime import blocking
from cairn.store.records import RunRecord

_KINDS = blocking.KINDS


def waiting_text(found: Mapping[str, Any], *, now: float, run_id: str = "RUN_ID") -> str:
    """`event 'approval' (times out 2025-06-01 12:00:00, in 6d23h)` and the like.

    A run that keeps waking without progress says so first.
    """
    flag = found.get("spinning")
    if found["kind"] == "spinning":  # executing now, between two futile wake-ups
        return f"nothing it can take: it {flag}"
    text = _waiting_text(found, now=now, run_id=run_id)
    return text if flag is None else f"{text} — but it {flag}"


def _waiting_text(found: Mapping[str, Any], *, now: float, run_id: str) -> str:
    kind, name, until = found["kind"], found.get("name"), found.get("until")
    if kind == "sleep":
        return f"its sleep to end at {output.when(until)}{_in(until, now)}"
    if kind == "retry":
        return f"step {name!r} to be retried at {output.when(until)}{_in(until, now)}"
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
