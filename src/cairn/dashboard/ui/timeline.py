"""The run page's timeline: history entries with their inputs, outputs and every attempt.

A step entry's own start and end are those of the attempt that produced its outcome; its
failed and interrupted attempts come from `RunControl.attempts`, each with its own start
and under its own execution. The timeline heads each entry with the whole span, first
attempt to outcome, and lists the attempts. Steps without an outcome yet come last: one
between attempts ("retrying"), or one executing now, with its worker and heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    # A sleep's end or a wait's state is said in the entry's head, not as an output:
    # `output "no deadline"` (a JSON string) read as if the wait had returned that.
    state = None
    if entry.kind == "sleep" and isinstance(entry.result, datetime):
        state = f"until {words.when(entry.result)}"
    elif entry.status in ("waiting", "cancelled"):  # a wait, open or ended by a cancel
        state = words.waiting_outcome(entry)
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
        "has_outcome": state is None and entry.result is not None and entry.status != "failed",
        "summary": (
            words.received(entry) or words.ran_on(entry) or words.scheduled(entry) or state
        ),
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


REFERENCE = 60  # characters of an error shown again as a reference to where it is whole


def refer(entries: list[dict[str, Any]], run_error: Mapping[str, Any] | None) -> None:
    """Mark where each error is shown whole: once, the first time the page shows it.

    The page shows the run's error first, then its entries in order, each followed by
    its attempts. A failed step's error is most often the same as its attempts' and the
    run's: shown whole at each place, a long one filled the page. An error (or a
    traceback) already shown whole is shown again only as its start, linked to it.
    Sets on each entry and failed attempt: `error_text`, `error_id` (the anchor of one
    shown whole), `error_ref` (the anchor it refers to instead), `error_short` and
    `traceback_shown`.
    """
    whole: list[tuple[str, str]] = []  # (text, anchor), in page order
    tracebacks: set[str] = set()
    if run_error:
        whole.append((words.error_line(run_error), "run-error"))
        tracebacks.add(str(run_error.get("traceback") or ""))
    for entry in entries:
        if entry["error"]:
            _mark(entry, entry["error"], whole, tracebacks, REFERENCE)
        for attempt in entry["tries"]:
            if not (attempt["succeeded"] or attempt["running"] or attempt["interrupted"]):
                _mark(attempt, attempt, whole, tracebacks, 0)


def _mark(
    item: dict[str, Any],
    error: Mapping[str, Any],
    whole: list[tuple[str, str]],
    tracebacks: set[str],
    width: int,
) -> None:
    """Mark one error (see `refer`); a reference keeps `width` characters of it.

    0 keeps its type alone: an attempt's line holds its times and retry too.
    """
    text = words.error_line(error)
    ref = next((anchor for shown, anchor in whole if text and text in shown), None)
    item["error_text"], item["error_ref"], item["error_id"] = text, ref, None
    kind = str(error.get("error_type") or error.get("type") or "")
    if not width and kind:
        item["error_short"] = kind
    else:
        width = width or REFERENCE
        item["error_short"] = text if len(text) <= width else text[: width - 1] + "…"
    if ref is None:
        item["error_id"] = f"error-{len(whole)}"
        whole.append((text, item["error_id"]))
    traceback = str(error.get("traceback") or "")
    item["traceback_shown"] = bool(traceback) and traceback not in tracebacks
    tracebacks.add(traceback)
