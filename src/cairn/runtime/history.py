"""A run's record as people read it: every entry and attempt of every execution.

Nothing an operator saw vanishes: a retry keeps the failed entry it runs again (marked
`superseded`) and every attempt, each under the execution that made it; a step that a
crash or a takeover interrupted is an attempt with outcome "interrupted". Beside the
history: the steps executing now (as the worker's last heartbeat said), and the runs
copied from this one. Reads only; `RunControl` serves these.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from cairn.codecs import coded
from cairn.core import hook_tokens, step_input
from cairn.models import Execution, History, HistoryEntry, RunStatus
from cairn.serialization import Serializer
from cairn.store import in_flight
from cairn.store.programs import control, workers
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import Store
from cairn.store.records import (
    INTERRUPTED,
    AttemptRecord,
    ExecutionRecord,
    RunRecord,
    StepRecord,
    StepTaskRecord,
)

Decode = Callable[[str | None], Any]

# `Execution.cause` of a run's first execution when it was started (not copied).
STARTED = "start"
RETRY = "retry"
# The status of a history entry (a wait, a sleep) that its run's cancellation ended.
CANCELLED = "cancelled"


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def executions(run: RunRecord, records: list[ExecutionRecord]) -> list[Execution]:
    """Every execution of `run`, by number: the first one is its start unless recorded."""
    found = {
        r.execution: Execution(
            r.execution,
            datetime.fromtimestamp(r.started_at, UTC),
            r.cause,
            r.started_by,
            r.from_seq,
        )
        for r in records
    }
    found.setdefault(1, Execution(1, datetime.fromtimestamp(run.created_at, UTC), STARTED))
    return [found[number] for number in sorted(found)]


def execution_of(seq: int, known: list[Execution]) -> int:
    """The execution that recorded live journal entry `seq` (as store's EXECUTION_OF_SEQ).

    The last retry that began recording at or before `seq`; 1 if none did.
    """
    number = 1
    for execution in known:
        if execution.cause == RETRY and execution.from_seq <= seq:
            number = max(number, execution.number)
    return number


async def history(
    store: Store,
    run: RunRecord,
    decode: Decode,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    now: float,
    serializer: Serializer,
    after_seq: int = 0,
    limit: int | None = None,
) -> History:
    """Every durable operation of `run`, of every execution, in the order they happened.

    `decode` reads a stored value, `serializer` a stored error (decrypted with its keys);
    `args` and `kwargs` are the run's input, decoded;
    `now` tells a sleep still going on from one that ended. With `after_seq` or `limit`,
    one page: the journal entries with seq > `after_seq` (at most `limit`) and the
    entries retries took out whose seq falls in the same range; `History.next_after`
    is then the `after_seq` of the next page (None on the last one).
    """
    paged = after_seq > 0 or limit is not None
    steps = await store.read(
        journal_ops.load_journal(
            run.run_id, inputs=True, after_seq=after_seq, limit=None if limit is None else limit + 1
        )
    )
    next_after = None
    if limit is not None and len(steps) > limit:
        steps = steps[:limit]
        next_after = steps[-1].seq
    lineage = await store.read(control.load_lineage(run.run_id))
    retried = lineage.retried
    if paged:
        # A retried entry sits beside the live entries of its seq: same page.
        retried = [
            r
            for r in retried
            if r.step.seq > after_seq and (next_after is None or r.step.seq <= next_after)
        ]
    known = executions(run, lineage.executions)
    failures: dict[tuple[int, str], int] = {}
    for attempt in await store.read(journal_ops.load_attempts(run.run_id)):
        where = (attempt.execution, attempt.key)
        failures[where] = max(failures.get(where, 0), attempt.attempt)
    children = await _children_now(store, run, steps, decode)
    entries = [
        _entry(run, now, step, execution_of(step.seq, known), False, failures, decode, serializer)
        for step in steps
    ]
    entries += [
        _entry(run, now, r.step, r.execution, True, failures, decode, serializer) for r in retried
    ]
    if children:
        entries = [_child_now(entry, children) for entry in entries]
    entries.sort(key=lambda entry: (entry.execution, entry.seq))
    return History(
        entries,
        run_id=run.run_id,
        workflow=run.workflow,
        args=args,
        kwargs=kwargs,
        executions=known,
        next_after=next_after,
    )


async def _children_now(
    store: Store, run: RunRecord, steps: list[StepRecord], decode: Decode
) -> dict[str, tuple[str, float | None]]:
    """Of a finished run, each child whose end it never took: its status now, and end.

    A run that ended without awaiting a child (a detached one, or one it was not yet
    waiting for when it was cancelled) never learns how that child is doing; its history
    asks the child instead of saying `waiting` (or `cancelled`) about a wait that is over:
    a detached child whatever its status, an attached one once it has ended.
    """
    if run.finished_at is None:
        return {}
    found: dict[str, tuple[str, float | None]] = {}
    for step in steps:
        facts = decode(step.result) if step.kind == "child" and step.status == "waiting" else None
        if isinstance(facts, dict) and facts.get("child_id"):
            child = await store.read(run_ops.get_run(str(facts["child_id"])))
            # An attached child not yet ended is ending: the run's end asked it to cancel.
            if child is not None and (child.detached or RunStatus(child.status).finished):
                found[child.run_id] = (child.status.lower(), child.finished_at)
    return found


def _child_now(entry: HistoryEntry, children: dict[str, tuple[str, float | None]]) -> HistoryEntry:
    """`entry`, if it is an open wait for one of `children`, with that child's status."""
    facts = entry.result
    if entry.kind != "child" or not isinstance(facts, dict) or entry.status == "timeout":
        return entry
    now = children.get(str(facts.get("child_id")))
    if now is None or "status" in facts:
        return entry
    return replace(entry, status=now[0], finished_at=_dt(now[1]))


def _entry(
    run: RunRecord,
    now: float,
    step: StepRecord,
    execution: int,
    superseded: bool,
    failures: dict[tuple[int, str], int],
    decode: Decode,
    serializer: Serializer,
) -> HistoryEntry:
    result = decode(step.result)
    status, finished_at = step.status, step.finished_at
    if step.kind == "child" and isinstance(result, dict) and "status" in result:
        status = str(result["status"]).lower()  # how the child itself ended
        if status == "completed" and isinstance(result.get("result"), str):
            # The child's message carries its result as stored: read it as a value.
            result = {**result, "result": decode(result["result"])}
    elif step.kind == "sleep" and isinstance(result, int | float):
        status, finished_at, result = _sleep_entry(run, float(result), now)
        if finished_at is not None and step.started_at is not None:
            # A sleep until a moment already past ended as it began, not before.
            finished_at = max(finished_at, step.started_at)
    if status == "waiting" and run.status == RunStatus.CANCELLED.value:
        status, finished_at = CANCELLED, run.finished_at  # the cancel ended the wait
    return HistoryEntry(
        seq=step.seq,
        kind=step.kind,
        name=step.name,
        status=status,
        attempts=max(step.attempts, failures.get((execution, step.key), 0)),
        started_at=_dt(step.started_at),
        finished_at=_dt(finished_at),
        result=hook_tokens.redact(result) if step.kind == "hook" else result,
        error=coded.shown_error(serializer, step.error),
        key=step.key,
        input=step_input.shown(decode(step.input)),
        execution=execution,
        superseded=superseded,
    )


def _sleep_entry(run: RunRecord, wake: float, now: float) -> tuple[str, float | None, datetime]:
    """A sleep's status, end and result (its wake time) as history shows them.

    The journal records a sleep once, with its wake time, when it starts. It ended at that
    time (or when its run ended, if sooner: "cancelled" by a cancel); until then it is
    "sleeping".
    """
    if run.finished_at is not None:
        cut = run.finished_at < wake and run.status == RunStatus.CANCELLED.value
        status = CANCELLED if cut else "completed"
        return status, min(wake, run.finished_at), datetime.fromtimestamp(wake, UTC)
    if wake > now:
        return "sleeping", None, datetime.fromtimestamp(wake, UTC)
    return "completed", wake, datetime.fromtimestamp(wake, UTC)


def attempt_dict(attempt: AttemptRecord, serializer: Serializer) -> dict[str, Any]:
    """One failed or interrupted attempt as `RunControl.attempts` lists it.

    Its message and traceback are decrypted with `serializer`'s keys ("encrypted (k1)"
    without them).
    """
    started = attempt.started_at
    return {
        "key": attempt.key,
        "attempt": attempt.attempt,
        "execution": attempt.execution,
        "outcome": attempt.outcome,
        "worker": attempt.worker,
        "error_type": attempt.error_type,
        "message": coded.shown_text(serializer, attempt.message),
        "traceback": coded.shown_text(serializer, attempt.traceback),
        "started_at": _dt(started),
        "failed_at": _dt(attempt.failed_at),
        "duration": None if started is None else attempt.failed_at - started,
        "retry_at": _dt(attempt.retry_at),
    }


def queued_interruptions(run_id: str, tasks: list[StepTaskRecord]) -> list[AttemptRecord]:
    """The claims of step-queue attempts that their worker died holding, as attempts.

    Interrupted like a local step whose worker died: `worker` ran it from `started_at`
    and let its lease run out at `failed_at`, when another worker of the queue could take
    it over (see StepTaskRecord.interrupted).
    """
    found = []
    for task in tasks:
        if not task.interrupted:
            continue
        # The task id is RUN_ID/EXECUTION/KEY@ATTEMPT (core/remote_steps.task_id).
        execution = task.task_id[len(run_id) + 1 :].partition("/")[0]
        for claim in json.loads(task.interrupted):
            worker = claim.get("worker")
            ended = claim.get("lease_until") or claim.get("started_at") or task.created_at
            found.append(
                AttemptRecord(
                    run_id=run_id,
                    key=task.key,
                    attempt=task.attempt,
                    error_type=INTERRUPTED,
                    message=(
                        f"worker {worker} of step queue {task.queue!r} stopped renewing its "
                        f"claim while attempt {task.attempt} of step {task.step!r} ran; "
                        "it may have run in part or in full"
                    ),
                    traceback="",
                    failed_at=float(ended),
                    retry_at=None,
                    started_at=claim.get("started_at"),
                    execution=int(execution) if execution.isdigit() else 1,
                    outcome=INTERRUPTED,
                    worker=worker,
                )
            )
    return found


async def executing(store: Store, run: RunRecord) -> list[dict[str, Any]]:
    """The step attempts executing for `run` now, as its worker's last heartbeat said.

    Each: key, name, attempt, started_at, worker, heartbeat_at (of that worker). A step
    is listed once it has run about a second (runtime/in_flight.py), and no longer once
    its outcome or failure is recorded. Empty unless the run is RUNNING.
    """
    if run.status != RunStatus.RUNNING.value or run.owner is None:
        return []
    worker = await store.read(workers.get_worker(run.owner))
    if worker is None:
        return []
    steps = in_flight.decode(worker.executing, run.run_id, run.fence)
    if not steps:
        return []
    recorded = {step.key for step in await store.read(journal_ops.load_journal(run.run_id))}
    ended = {
        (a.key, a.attempt)
        for a in await store.read(journal_ops.load_attempts(run.run_id))
        if a.execution == run.execution
    }
    return [
        {
            "key": step.key,
            "name": step.name,
            "attempt": step.attempt,
            "execution": run.execution,
            "started_at": _dt(step.started_at),
            "worker": run.owner,
            "heartbeat_at": _dt(worker.heartbeat_at),
        }
        for step in steps
        if step.key not in recorded and (step.key, step.attempt) not in ended
    ]


async def copies(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The runs restarted or forked from `run_id`, oldest first."""
    lineage = await store.read(control.load_lineage(run_id))
    return [
        {
            "run_id": copy.run_id,
            "how": "restart" if copy.restarted_from == run_id else "fork",
            "from_seq": copy.forked_from_seq,
            "created_at": _dt(copy.created_at),
            "status": copy.status,
        }
        for copy in lineage.copies
    ]
