"""The JSON forms of runs, their history entries and executions, and one run read whole.

`cairn runs list|show --json` print these, and the HTTP API answers them
(`GET /api/v1/runs`, `GET /api/v1/runs/{id}`, `.../history`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cairn import blobs
from cairn.codecs import coded
from cairn.models import Execution, HistoryEntry, RunStatus, RunSummary
from cairn.representation.json_form import jsonable
from cairn.representation.words import span
from cairn.runtime import blocking, leases
from cairn.runtime.control import RunControl
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import INTERRUPTED, RunRecord


def summary_dict(run: RunSummary) -> dict[str, Any]:
    """The JSON form of a listed run."""
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "status": run.status.value,
        "created_at": jsonable(run.created_at),
        "updated_at": jsonable(run.updated_at),
        "started_at": jsonable(run.started_at),
        "columns": jsonable(run.columns),
        "progress": jsonable(run.progress),
        "parent_id": run.parent_id,
        "queue": run.queue,
        "error": jsonable(run.error),
        "version": run.version,
        "waiting_for": run.waiting_for,
        "continued_from": run.continued_from,
        "continued_to": run.continued_to,
        "execution": run.execution,
        "restarted_from": run.restarted_from,
        "forked_from": run.forked_from,
        "forked_from_seq": run.forked_from_seq,
        "origin": run.origin,
        "futile_wakes": run.futile_wakes,
    }


def entry_dict(entry: HistoryEntry) -> dict[str, Any]:
    """The JSON form of a history entry."""
    return {
        "seq": entry.seq,
        "key": entry.key,
        "kind": entry.kind,
        "name": entry.name,
        "status": entry.status,
        "attempts": entry.attempts,
        "started_at": jsonable(entry.started_at),
        "finished_at": jsonable(entry.finished_at),
        "duration": span(entry.started_at, entry.finished_at),
        "input": jsonable(entry.input),
        "result": jsonable(entry.result),
        "error": jsonable(entry.error),
        "execution": entry.execution,
        "superseded": entry.superseded,
    }


def execution_dict(execution: Execution) -> dict[str, Any]:
    """The JSON form of one execution of a run."""
    return {
        "execution": execution.number,
        "cause": execution.cause,
        "by": execution.by,
        "started_at": jsonable(execution.started_at),
        "from_seq": execution.from_seq,
    }


@dataclass(frozen=True, slots=True)
class Shown:
    """Everything `cairn runs show` prints about one run."""

    run: RunRecord
    args: Any
    result: Any
    error: dict[str, Any] | None
    history: list[HistoryEntry]
    attempts: list[dict[str, Any]]
    waiting: dict[str, Any] | None
    now: float
    executions: list[Execution] = field(default_factory=list)
    executing: list[dict[str, Any]] = field(default_factory=list)
    copies: list[dict[str, Any]] = field(default_factory=list)
    # The journal's length (every execution's live entries), read or not.
    entries: int = 0
    # How many of them `history` leaves out (the oldest), when read with a window.
    skipped: int = 0


# How many generations of children a run shown reads to say what it waits for: a parent
# waiting on a child waiting on a child... names the nearest ones, not an unbounded chain.
CHILD_DEPTH = 3


async def fetch(
    control: RunControl, run_id: str, *, window: int | None = None, child_depth: int = CHILD_DEPTH
) -> Shown:
    """Read one run, its history and attempts, what it executes or waits for, its copies.

    Every execution's entries and attempts are read; with `window`, only the entries
    after the journal's last `window` seqs (the dashboard's run page and `cairn runs
    show`: a history of 50,000 entries is not read whole to show one run). The
    dashboard's `GET /api/v1/runs/{id}` shows the same facts. A run waiting on a child
    says what the child waits for, `child_depth` generations down (see `waiting_of`).
    """
    run = await control.record(run_id)
    entries, top = await control.store.read(journal_ops.journal_extent(run_id))
    after = max(0, top - window) if window is not None and entries > window else 0
    history = await control.history(run_id, after=after)
    live = sum(not entry.superseded for entry in history)
    attempts = await control.attempts(run_id)
    executing = await control.executing(run_id)
    copies = await control.copies(run_id)
    now = control.clock.now()
    waiting = await waiting_of(control, run, now=now, child_depth=child_depth)
    if waiting is not None and waiting["kind"] == "worker":
        known = leases.known_workflows(await control.store.read(worker_ops.list_workers()))
        if known is not None and run.workflow not in known:
            waiting["workers_know"] = sorted(known)  # and none of them executes this one
            waiting["workflow"] = run.workflow
    if waiting is not None and waiting["kind"] == "step":
        queue = (waiting.get("name") or "").rpartition("@")[2]
        workers = await control.store.read(worker_ops.list_workers())
        # Heartbeats carry the database's real time, whatever clock the control keeps.
        if not leases.serves_step_queue(workers, queue, time.time()):
            waiting["no_live_worker"] = True
    if (
        run.status == RunStatus.RUNNING
        and run.owner
        and (waiting or {}).get("kind")
        in (
            None,
            "spinning",
        )
    ):
        workers = await control.store.read(worker_ops.list_workers())
        # Heartbeats carry the database's real time, whatever clock the control keeps.
        orphan = leases.orphaned(workers, run, time.time())
        if orphan is not None:  # its owner is not live: what will take it over, if anything
            waiting = {**(waiting or {}), "kind": "takeover", "name": run.queue, "until": None}
            waiting.update(orphan)
    return Shown(
        run=run,
        args=_decode(control, run.args),
        result=_decode(control, run.result),
        error=coded.shown_error(control.serializer, run.error),
        history=list(history),
        attempts=attempts,
        waiting=waiting,
        now=now,
        executions=history.executions,
        executing=executing,
        copies=copies,
        entries=entries,
        skipped=max(0, entries - live) if after else 0,
    )


async def waiting_of(
    control: RunControl, run: RunRecord, *, now: float, child_depth: int = CHILD_DEPTH
) -> dict[str, Any] | None:
    """What holds one run (`blocking.waiting`), with its open task and awaited child.

    A run waiting on a child gets `child`: the child's `run_id`, `status` and `waiting`
    (its own reason, read the same way), down at most `child_depth` generations; past
    that, a child's reason names its own child's id only. One read per generation.
    """
    task_id = None
    if run.status == RunStatus.WAITING and (run.waiting_for or "").startswith("task:"):
        task_id = await open_task(control, run)
    found = blocking.waiting(run, now=now, task_id=task_id)
    child_id = None if found is None else found.get("child_id")
    if child_depth < 1 or not child_id:
        return found
    child = await control.store.read(run_ops.get_run(child_id))
    if child is not None and found is not None:
        waits = await waiting_of(control, child, now=now, child_depth=child_depth - 1)
        found["child"] = {"run_id": child.run_id, "status": child.status, "waiting": waits}
    return found


def _child_json(child: dict[str, Any] | None) -> dict[str, Any] | None:
    """A `child` of a shown run's waiting, with its times as JSON (ISO 8601, UTC)."""
    if child is None:
        return None
    waits = child.get("waiting")
    if waits is not None:
        waits = {**waits, "until": jsonable(_utc(waits.get("until")))}
        if "child" in waits:
            waits["child"] = _child_json(waits["child"])
    return {**child, "waiting": waits}


async def open_task(control: RunControl, run: RunRecord) -> str | None:
    """The id of the open human task a WAITING run waits for, if any."""
    name = (run.waiting_for or "").partition(":")[2]
    tasks = await control.tasks.list(status="open", run_id=run.run_id)
    matching = [t for t in tasks if t.name == name] or tasks
    return matching[-1].task_id if matching else None


def _decode(control: RunControl, text: str | None) -> Any:
    if text is None:
        return None
    if (offloaded := blobs.shown(control.serializer, text)) is not None:
        return offloaded
    try:
        return coded.shown_value(control.serializer, text)  # "encrypted (k1)" without keys
    except Exception:
        # Written by another serializer or a type no longer importable: show what is stored.
        return text


def _positional(args: Any) -> Any:
    """A run's positional arguments as shown; an offloaded payload as its summary."""
    if isinstance(args, dict) and set(args) == {"offloaded"}:
        return args  # {"offloaded": {"size", "sha256", "preview", ...}}: kwargs are in it
    return (args or {}).get("args", []) if isinstance(args, dict) else args


def run_dict(shown: Shown) -> dict[str, Any]:
    """The JSON form of one run's facts."""
    run, args = shown.run, shown.args
    waiting = None
    if shown.waiting is not None:
        waiting = {**shown.waiting, "until": jsonable(_utc(shown.waiting.get("until")))}
        if "child" in waiting:
            waiting["child"] = _child_json(waiting["child"])
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "version": run.version,
        "status": run.status,
        "args": jsonable(_positional(args)),
        "kwargs": jsonable(args.get("kwargs", {}) if isinstance(args, dict) else {}),
        "result": jsonable(shown.result),
        "error": jsonable(shown.error),
        "created_at": jsonable(_utc(run.created_at)),
        "updated_at": jsonable(_utc(run.updated_at)),
        "started_at": jsonable(_utc(run.started_at)),
        "finished_at": jsonable(_utc(run.finished_at)),
        "attempt": run.attempt,
        "recoveries": run.recoveries,
        "max_recoveries": run.max_recoveries,
        "owner": run.owner,
        "wake_at": jsonable(_utc(run.wake_at)),
        "waiting_for": run.waiting_for,
        "waiting": waiting,
        "control": run.control,
        "parent_id": run.parent_id,
        "queue": run.queue,
        "priority": run.priority,
        "dedup_key": run.dedup_key,
        "partition": run.partition_key,
        "columns": json.loads(run.columns) if run.columns else {},
        "progress": json.loads(run.progress) if run.progress else None,
        "scheduled_at": jsonable(_utc(run.scheduled_at)),
        "continued_from": run.continued_from,
        "continued_to": run.continued_to,
        "execution": run.execution,
        "executions": [execution_dict(e) for e in shown.executions],
        "restarted_from": run.restarted_from,
        "forked_from": run.forked_from,
        "forked_from_seq": run.forked_from_seq,
        "copies": jsonable(shown.copies),
        "executing": jsonable(shown.executing),
        "origin": run.origin,
    }


def _utc(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def unrecorded_recoveries(shown: Shown) -> int:
    """How many of the run's recoveries recorded no interrupted attempt.

    A worker that takes a run over records the steps its owner (dead, or alive but past
    its lease) had in flight as interrupted attempts, one batch per recovery (they share
    its time), but it knows only those the owner's heartbeats had published: a step that
    had run for less than about a second is not among them (runtime/in_flight.py). An
    owner that comes back records nothing either: the taker numbered its next attempt as
    the one cut off. A recovery with no batch may thus hide a step that started once more
    than its attempts say, or none (the owner died between steps): not knowing which,
    `cairn runs show` says so rather than guess.
    """
    batches = {
        (a.get("execution"), a.get("failed_at"))
        for a in shown.attempts
        if a.get("outcome") == INTERRUPTED
    }
    return max(0, shown.run.recoveries - len(batches))
