"""A run's facts in plain words, for people: times, durations, errors, progress, waits.

The CLI's tables and the dashboard's pages both show these; the texts are the same on
either surface because they come from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cairn.blobs import reference
from cairn.core import mailbox, remote_steps, scheduled_starts
from cairn.limits import size_words
from cairn.models import Execution, HistoryEntry, RunStatus
from cairn.representation.json_form import dumps
from cairn.runtime import blocking
from cairn.store.records import CANCELLED, INTERRUPTED


def short(value: Any, width: int = 60) -> str:
    """Compact one-line JSON of `value`, clipped to `width` characters.

    An offloaded value (blobs.shown) reads "offloaded 50.0 MiB sha256:1a2b3c4d…: preview"
    (or says its blob is missing, or unreadable and why).
    """
    if isinstance(value, dict) and isinstance(found := value.get("offloaded"), dict):
        size, sha256 = int(found.get("size") or 0), str(found.get("sha256"))
        text = f"offloaded {size_words(size)} sha256:{sha256[:12]}"
        preview, unreadable = found.get("preview"), found.get("unreadable")
        if unreadable:  # the blob store refused, or did not answer: said, not raised
            text = f"unreadable blob ({unreadable}): {text}"
        else:
            text = f"missing blob: {text}" if preview is None else f"{text}: {preview}"
        return text if len(text) <= width else text[: width - 1] + "…"
    text = dumps(value, indent=None)
    return text if len(text) <= width else text[: width - 1] + "…"


def when(moment: datetime | float | None) -> str:
    """A timestamp for people: local time to the second."""
    if moment is None:
        return ""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    """A duration for people: `850µs`, `12ms`, `1.24s`, `3m05s`, `2h01m`."""
    if value is None:
        return ""
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.2f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def span(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from `start` to `end`, or None if either is missing."""
    return None if start is None or end is None else (end - start).total_seconds()


def error_line(error: Mapping[str, Any] | None) -> str:
    """`type: message` of a stored error (run, step or attempt), on one line."""
    if not error:
        return ""
    message = " ".join(str(error.get("message", "")).split())
    kind = error.get("error_type") or error.get("type") or ""
    if kind == _CANCELLED:  # "cancelled at step 'charge' (charge#1)"
        reason = "" if message in ("", "cancelled") else f": {message}"
        at = error.get("at")
        return f"cancelled{reason}" + (f", {stopped_at(str(at))}" if at else "")
    if kind in _SELF_DESCRIBING:
        return message  # "step 'charge' failed after 3 attempt(s): builtins.ValueError: ..."
    return f"{kind}: {message}" if kind else message


_SELF_DESCRIBING = frozenset({"cairn.errors.StepFailed", "cairn.errors.StepTimeout"})
_CANCELLED = "cairn.errors.Cancelled"


def stopped_at(key: str) -> str:
    """Where a run stopped, from the key of a durable point: `at step 'charge' (charge#1)`.

    `~sleep#1` is a sleep, `~event:approval#1` a wait for event 'approval', `~check#2` the
    second `check_cancelled()` call (core/journal.py names them).
    """
    name = key.rpartition("#")[0] or key
    if not name.startswith("~"):
        return f"at step {name!r} ({key})"
    kind, _, what = name[1:].partition(":")
    if kind == "check":
        return f"at check_cancelled() ({key})"
    if kind == "arguments":  # core/blob_reads.py: a cancel met while they were read
        return f"before its code began, reading its arguments ({key})"
    if kind == "sleep":
        return f"in sleep {what!r} ({key})" if what else f"in a sleep ({key})"
    return f"in {kind} {what!r} ({key})" if what else f"at {key}"


_CAUSES = {"start": "started", "retry": "after retry", "restart": "a restart", "fork": "a fork"}


def unrecorded_note(recoveries: int) -> str:
    """What a run's history cannot say after `recoveries` recoveries that recorded no step.

    See representation/runs.py `unrecorded_recoveries`.
    """
    if recoveries == 1:
        times, whom = "once", "a worker that died or lost its lease"
    else:
        times, whom = f"{recoveries} times", "workers that died or lost their leases"
    return (
        f"taken over {times} from {whom}, with no step "
        "recorded in flight: a step that had run under about a second may have started "
        "once more than its ATTEMPTS say"
    )


# What a stored control request does next, as the CLI's answer and the run page say it.
CONTROL_NEXT = {
    "cancel": "it ends CANCELLED at its current or next durable point, unless it finishes first",
    "pause": "it pauses at its next durable point",
}


def cancel_stands(status: str) -> str:
    """Why a pause or resume of a run with a cancel requested changed nothing."""
    return f"a cancel is requested and stands ({status}); {CONTROL_NEXT['cancel']}"


def control_text(control: str, at: float | None) -> str:
    """`cancel requested at 2026-...; it ends CANCELLED at ...`: a request not yet acted on.

    `at` is the run's last change (`updated_at`): the request, unless a worker has
    touched the run since (a claim, a failed attempt).
    """
    said = f"{control} requested at {when(at)}" if at else f"{control} requested"
    return f"{said}; {CONTROL_NEXT.get(control, 'at its next durable point')}"


def execution_label(execution: Execution, *, named: bool = True) -> str:
    """`execution 2, after retry by ada at 2026-03-01 10:00:00`, for people.

    Without `named`, the same without the leading "execution ".
    """
    cause = _CAUSES.get(execution.cause, execution.cause)
    by = f" by {execution.by}" if execution.by else ""
    label = f"{execution.number}, {cause}{by} at {when(execution.started_at)}"
    return f"execution {label}" if named else label


def attempt_outcome(attempt: Mapping[str, Any]) -> str:
    """How a failed, interrupted or cancelled attempt ended, on one line.

    `interrupted (worker w-1, started 2026-03-01 10:00:00)`: its worker died or lost the
    run while it ran, so it may have run in part or in full. `cancelled: step 'x'
    stopped: its run was cancelled`: its code stopped at `cairn.check_cancelled()`.
    """
    if attempt.get("outcome") == CANCELLED:  # its code stopped for a cancel of its run
        return f"cancelled: {' '.join(str(attempt.get('message', '')).split())}"
    if attempt.get("outcome") == INTERRUPTED:
        started = attempt.get("started_at")
        since = f", started {when(started)}" if started is not None else ""
        return f"interrupted (worker {attempt.get('worker') or 'unknown'}{since})"
    return error_line(attempt)


def progress_text(progress: Mapping[str, Any] | None, status: str | None = None) -> str:
    """`loading rows · 40/100 (40%)`; empty when there is no progress.

    A COMPLETED run's progress is shown as final, `done (last: loading rows)`: the count
    it last reported (1/2, say) would read as unfinished work.
    """
    if not progress:
        return ""
    message = " ".join(str(progress.get("message") or "").split())
    if status == RunStatus.COMPLETED.value:
        return f"done (last: {message})" if message else "done"
    current, total = progress.get("current"), progress.get("total")
    count = ""
    if isinstance(current, int | float) and isinstance(total, int | float) and total > 0:
        count = f"{current:g}/{total:g} ({current / total:.0%})"
    elif isinstance(current, int | float):
        count = f"{current:g}"
    return " · ".join(part for part in (message, count) if part)


def progress_percent(progress: Mapping[str, Any] | None, status: str | None = None) -> int | None:
    """How far a progress count got, 0 to 100 (100 once the run COMPLETED); None without one."""
    progress = progress or {}
    current, total = progress.get("current"), progress.get("total")
    if not (isinstance(current, int | float) and isinstance(total, int | float) and total > 0):
        return None
    if status == RunStatus.COMPLETED.value:
        return 100
    return max(0, min(100, round(100 * current / total)))


def input_text(value: Any, width: int = 40) -> str:
    """A step's input as the call's arguments, `(1, "a", retry=True)`, clipped to `width`.

    Empty for operations without one (sleeps, waits) and for steps recorded before inputs
    were kept; an input too large or unserializable to keep shows why it was omitted.
    """
    if isinstance(value, str) and value.startswith("encrypted ("):
        return value  # "encrypted (k1)": read without the key (cairn.codecs)
    if not isinstance(value, Mapping):
        return ""
    if "omitted" in value:
        text = f"(omitted: {value['omitted']})"
    else:
        args = [dumps(arg, indent=None) for arg in value.get("args") or ()]
        args += [f"{k}={dumps(v, indent=None)}" for k, v in (value.get("kwargs") or {}).items()]
        text = f"({', '.join(args)})"
    return text if len(text) <= width else text[: width - 1] + "…"


def received(entry: HistoryEntry) -> str | None:
    """What a mailbox entry took, in words: "received 3 messages on 'orders'".

    None for other entries, and for a receive still waiting.
    """
    if entry.kind != mailbox.KIND or not isinstance(entry.result, list):
        return None
    if entry.status == "timeout":
        return f"timed out, no message on {entry.name!r}"
    count = len(entry.result)
    return f"received {count} message{'' if count == 1 else 's'} on {entry.name!r}"


def ran_on(entry: HistoryEntry) -> str | None:
    """Where an attempt sent to a step queue ran, in words; None for other entries.

    "on worker W of step queue 'gpu': completed" (or "failed: ..."); a report still
    awaited says where it was sent, and one the run's cancel ended that it was cancelled
    (the attempts table names the worker that was executing it).
    """
    if entry.kind != remote_steps.REMOTE or not isinstance(entry.result, dict):
        return None
    facts = entry.result
    if "ok" not in facts:  # no report: the attempt's facts as sent
        sent = f"sent to step queue {facts.get('queue')!r}"
        return f"{sent}: cancelled with its run" if entry.status == CANCELLED else sent
    verdict = "completed"
    if not facts.get("ok"):
        verdict = f"failed: {error_line(facts.get('failure') or {})}"
    return f"on worker {facts.get('worker')} of step queue {facts.get('queue')!r}: {verdict}"


def scheduled(entry: HistoryEntry) -> str | None:
    """What a `cairn.schedule_workflow` call started, in words; None for other entries.

    "run R of 'annual_review', starts 2026-01-01 00:00:00" (or "starts at once").
    """
    if entry.kind != scheduled_starts.KIND or not isinstance(entry.result, Mapping):
        return None
    facts = entry.result
    at = facts.get("run_at")
    start = "at once"
    if isinstance(at, str):
        try:
            start = when(datetime.fromisoformat(at))
        except ValueError:
            start = at
    return f"run {facts.get('run_id')} of {facts.get('workflow')!r}, starts {start}"


def waiting_outcome(entry: HistoryEntry) -> str:
    """What an unfinished wait records: its task and deadline (never a hook's token)."""
    facts = entry.result if isinstance(entry.result, dict) else {}
    parts = []
    if facts.get("task_id"):
        parts.append(f"task {facts['task_id']}")
    if isinstance(facts.get("deadline"), int | float):
        parts.append(f"until {when(facts['deadline'])}")
    return ", ".join(parts) or "no deadline"


def waiting_text(found: Mapping[str, Any], *, now: float, run_id: str = "RUN_ID") -> str:
    """`event 'approval' (times out 2025-06-01 12:00:00, in 6d23h)` and the like.

    A run that keeps waking without progress says so first.
    """
    flag = found.get("spinning")
    if found["kind"] == "spinning":  # executing now, between two futile wake-ups
        return f"nothing it can take: it {flag}"
    text = _waiting_text(found, now=now, run_id=run_id)
    return text if flag is None else f"{text} — but it {flag}"


def takeover_text(found: Mapping[str, Any]) -> str:
    """`no takeover: owner silent 12s (lease 1s); no live worker on 'lane'` and the like.

    Of a RUNNING run whose owner is not live (runtime/leases.py `orphaned`): "no
    takeover" when no live worker claims runs of its queue (or knows its workflow), so
    nothing takes it over until one starts.
    """
    state, age, lease = found.get("owner_state"), found.get("silent_for"), found.get("lease")
    silent = "" if age is None else _short(age)
    if state == "gone":
        owner = "owner unregistered"
    elif state == "dead":
        owner = f"owner dead (silent {silent})" if silent else "owner dead"
    else:
        owner = f"owner silent {silent}" + ("" if lease is None else f" (lease {_short(lease)})")
    if found.get("takers"):
        return f"a live worker to take it over: {owner}"
    name, blocked = found.get("name"), found.get("blocked")
    none = "knows it" if blocked == "workflow" else f"on {name!r}" if name else "for it"
    return f"no takeover: {owner}; no live worker {none}"


def _short(value: float) -> str:
    """`0.5s`, `12s`, `3m05s`: a duration in a few characters."""
    return f"{value:.2g}s" if value < 10 else f"{value:.0f}s" if value < 60 else seconds(value)


def _waiting_text(found: Mapping[str, Any], *, now: float, run_id: str) -> str:
    kind, name, until = found["kind"], found.get("name"), found.get("until")
    if kind == "sleep":
        text = f"its sleep to end at {when(until)}{_in(until, now)}"
        if isinstance(until, int | float) and now - until > OVERDUE:
            text += ": a worker to take it (`cairn worker`)"  # due, and none has
        return text
    if kind == "retry":
        return f"step {name!r} to be retried at {when(until)}{_in(until, now)}"
    if kind == "resume":
        return f"`cairn runs resume {run_id}` (it is paused)"
    if kind == "queue":
        return str(found.get("reason") or f"a free slot on queue {name!r}")
    if kind == "blobs":  # a value's blob is written (or read) again until the store answers
        reason = str(found["reason"])
        verb = "give back" if reason.startswith(reference.READING) else "take"
        return f"the blob store to {verb} a value (retried until it does): {reason}"
    if kind == "locked":  # a lost database session holds its row: the server ends it
        return f"its row to be unlocked: {found['reason']}"
    if kind == "delay":
        return f"its start delay to end at {when(until)}{_in(until, now)}"
    if kind == "worker":
        where = f" serving queue {name!r}" if name else ""
        if "workers_know" in found:  # live workers exist, and none executes this workflow
            know = ", ".join(found["workers_know"]) or "no workflows"
            text = f"a worker{where} that imports its workflow (live workers know: {know})"
            named = str(found.get("workflow") or "")
            if named.startswith("__main__."):  # `python app.py` names it so; `-m app` does not
                text += (
                    f"; {named!r} was named in a script run as __main__: name it, "
                    '@cairn.workflow(name="...")'
                )
            return text
        return f"a worker{where} to take it (`cairn worker`)"
    if kind == "takeover":  # RUNNING, and its owner is not live
        return takeover_text(found)
    if kind == "step":  # parked while a worker of its step queue runs the attempt
        step, _, queue = (name or "").rpartition("@")
        text = f"a worker of step queue {queue!r} to run step {step!r}"
        return f"{text} (no live worker serves it)" if found.get("no_live_worker") else text
    text = f"{blocking.KINDS[kind]} {name!r}"
    if kind == "task" and found.get("task_id"):
        text += f" (task {found['task_id']})"
    if kind == "child" and found.get("child_id"):
        text += f" ({found['child_id']})"
    if until is not None:
        verb = "due" if kind == "task" else "expires" if kind == "hook" else "times out"
        text += f", {verb} {when(until)}{_in(until, now)}"
    child = found.get("child")
    if kind == "child" and child is not None:
        waits = child.get("waiting")
        if waits is None:  # executing, or ended with its message to the parent on its way
            text += f", which is {child['status']}"
        else:
            text += f", which waits for {waiting_text(waits, now=now, run_id=child['run_id'])}"
    return text


# Seconds past its time after which a wake-up or deadline no longer reads "due now": a
# worker takes a due run within a poll or two, so one long past it is waiting for one.
OVERDUE = 5.0


def _in(until: float | None, now: float) -> str:
    if until is None:
        return ""
    left = until - now
    if left > 0:
        return f" (in {seconds(left)})"
    return " (due now)" if -left <= OVERDUE else f" ({seconds(-left)} ago)"
