"""The run page's timeline: history entries with their inputs, outputs and every attempt.

A step entry's own start and end are those of the attempt that produced its outcome; its
failed and interrupted attempts come from `RunControl.attempts`, each with its own start
and under its own execution. The timeline heads each entry with the whole span, first
attempt to outcome, and lists the attempts. Steps without an outcome yet come last: one
between attempts ("retrying"), or one executing now, with its worker and heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cairn.models import HistoryEntry
from cairn.representation import words
from cairn.store.records import CANCELLED, INTERRUPTED


def timeline(
    entries: list[HistoryEntry],
    attempts: list[dict[str, Any]],
    executing: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """History entries with their attempts; steps without an outcome yet last."""
    failed: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for attempt in attempts:
        failed.setdefault((attempt["execution"], attempt["key"]), []).append(attempt)
    shown = [_entry(entry, failed.pop((entry.execution, entry.key), [])) for entry in entries]
    running = {(step["execution"], step["key"]): step for step in executing}
    for where in [*failed, *(w for w in running if w not in failed)]:
        tries = [_failed(attempt) for attempt in failed.get(where, [])]
        step = running.get(where)
        if step is not None:
            ended = {"succeeded": False, "interrupted": False, "cancelled": False}
            tries.append({**step, "running": True, **ended})
        # Between attempts (a retry backoff), executing now, or stopped for a cancel.
        state = "retrying" if step is None else "executing"
        if step is None and tries and tries[-1]["cancelled"]:
            state = "cancelled"
        shown.append(
            {
                "seq": None,
                "kind": "step",
                "name": where[1],
                "execution": where[0],
                "superseded": False,
                "status": state,
                "attempts": len(tries),
                "started_at": _first_start(tries),
                "duration": "",
                "input": None,
                "input_omitted": "",
                "outcome": None,
                "has_outcome": False,
                "summary": None,
                "error": None,
                "tries": tries,
            }
        )
    return shown


def _entry(entry: HistoryEntry, failed: list[dict[str, Any]]) -> dict[str, Any]:
    outcome = entry.result
    if entry.kind == "sleep" and isinstance(entry.result, datetime):
        outcome = f"until {words.when(entry.result)}"
    elif entry.status in ("waiting", "cancelled"):  # a wait, open or ended by a cancel
        outcome = words.waiting_outcome(entry)
    tries = [_failed(attempt) for attempt in failed]
    if failed and entry.status != "failed" and entry.started_at is not None:
        # The attempt that produced the outcome (a failed step's last one is in `failed`).
        tries.append(
            {
                "attempt": max(entry.attempts, len(failed) + 1),
                "started_at": entry.started_at,
                "took": _took(entry.started_at, entry.finished_at),
                "succeeded": True,
                "running": False,
                "interrupted": False,
                "cancelled": False,
            }
        )
    started = min(
        (moment for moment in (_first_start(failed), entry.started_at) if moment is not None),
        default=None,
    )
    shown_input, omitted = _input(entry.input)
    return {
        "seq": entry.seq,
        "kind": entry.kind,
        "name": entry.key or entry.name,
        "execution": entry.execution,
        "superseded": entry.superseded,
        "status": entry.status,
        "attempts": entry.attempts,
        "started_at": started,
        "duration": _took(started, entry.finished_at),
        "input": shown_input,
        "input_omitted": omitted,
        "outcome": outcome,
        "has_outcome": entry.result is not None and entry.status != "failed",
        "summary": words.received(entry) or words.ran_on(entry) or words.scheduled(entry),
        "error": entry.error,
        "tries": tries,
    }


def _failed(attempt: dict[str, Any]) -> dict[str, Any]:
    """A failed or interrupted attempt as the page lists it: start, duration, then why."""
    return {
        **attempt,
        "took": _took(attempt.get("started_at"), attempt.get("failed_at")),
        "succeeded": False,
        "running": False,
        "interrupted": attempt.get("outcome") == INTERRUPTED,
        "cancelled": attempt.get("outcome") == CANCELLED,
    }


def _input(value: Any) -> tuple[Any, str]:
    """What the page shows of a step's input, and why it was not kept ("" if it was).

    The positional arguments alone when no argument was named: what most calls pass.
    """
    if isinstance(value, dict) and isinstance(value.get("omitted"), str) and len(value) == 1:
        return None, value["omitted"]
    if isinstance(value, dict) and set(value) == {"args", "kwargs"} and not value["kwargs"]:
        return value["args"], ""
    return value, ""


def _first_start(attempts: list[dict[str, Any]]) -> datetime | None:
    starts = [a["started_at"] for a in attempts if a.get("started_at") is not None]
    return min(starts, default=None)


def _took(start: datetime | None, end: datetime | None) -> str:
    return words.seconds(words.span(start, end))
