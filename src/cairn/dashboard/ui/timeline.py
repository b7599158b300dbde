"""The run page's timeline: history entries with their inputs, outputs and every attempt.

A step entry's own start and end are those of the attempt that produced its outcome; its
failed attempts come from `RunControl.attempts`, each with its own start. The timeline
heads each entry with the whole span, first attempt to outcome, and lists the attempts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cairn.cli import output
from cairn.models import HistoryEntry


def timeline(entries: list[HistoryEntry], attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History entries with their attempts; attempts of steps not yet recorded last."""
    failed: dict[str, list[dict[str, Any]]] = {}
    for attempt in attempts:
        failed.setdefault(attempt["key"], []).append(attempt)
    shown = [_entry(entry, failed.pop(entry.key, [])) for entry in entries]
    for key, tries in failed.items():  # a step between attempts (retry backoff)
        first = _first_start(tries)
        shown.append(
            {
                "seq": None,
                "kind": "step",
                "name": key,
                "status": "retrying",
                "attempts": len(tries),
                "started_at": first,
                "duration": "",
                "input": None,
                "input_omitted": "",
                "outcome": None,
                "has_outcome": False,
                "error": None,
                "tries": [_failed(attempt) for attempt in tries],
            }
        )
    return shown


def _entry(entry: HistoryEntry, failed: list[dict[str, Any]]) -> dict[str, Any]:
    outcome = entry.result
    if entry.kind == "sleep" and isinstance(entry.result, datetime):
        outcome = f"until {output.when(entry.result)}"
    elif entry.status == "waiting":
        outcome = output.waiting_outcome(entry)
    tries = [_failed(attempt) for attempt in failed]
    if failed and entry.status != "failed" and entry.started_at is not None:
        # The attempt that produced the outcome (a failed step's last one is in `failed`).
        tries.append(
            {
                "attempt": max(entry.attempts, len(failed) + 1),
                "started_at": entry.started_at,
                "took": _took(entry.started_at, entry.finished_at),
                "succeeded": True,
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
        "status": entry.status,
        "attempts": entry.attempts,
        "started_at": started,
        "duration": _took(started, entry.finished_at),
        "input": shown_input,
        "input_omitted": omitted,
        "outcome": outcome,
        "has_outcome": entry.result is not None and entry.status != "failed",
        "error": entry.error,
        "tries": tries,
    }


def _failed(attempt: dict[str, Any]) -> dict[str, Any]:
    """A failed attempt as the page lists it: its own start and duration, then why."""
    return {
        **attempt,
        "took": _took(attempt.get("started_at"), attempt.get("failed_at")),
        "succeeded": False,
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
    return output.seconds(output.span(start, end))
