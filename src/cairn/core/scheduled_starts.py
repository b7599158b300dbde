"""`cairn.schedule_workflow` inside a run: a durable start of a detached run, now or later.

The run is stored PENDING with its start time (as `engine.start(run_at=...)` stores one)
and journaled once: a replay returns the same id and starts nothing. Its id is derived
from this run's id and the call's key, so an attempt that crashed between the two writes
finds the same run. Unlike other durable calls it takes effect without an `await`, as
pyworkflow's docs call it: the journal key, the durable point and the history position
are decided at the call, the writes run in a task of their own, and the run waits for
every such task before it finishes, parks, continues as new or fails (`settled`, in
core/pending_starts.py). Large arguments the blob store does not take at the call are
stored by that task, waited out as a child's are (core/durable.py `stored`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cairn import arguments, start_times
from cairn.blobs import BlobUnwritable
from cairn.core import children, durable, journal, step_input
from cairn.core.pending_starts import ScheduledRun
from cairn.core.signals import HandBack, Suspend
from cairn.errors import TransientWorkflow
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef
    from cairn.core.live_view import LiveView

KIND = "schedule"
NOT_SCHEDULED = (
    "a durable run cannot schedule it (the scheduled run would be lost with this process); "
    "make it durable"
)
NO_SCHEDULES = (
    "it cannot schedule runs: a scheduled run must outlive this process; schedule it from "
    "a durable workflow or with engine.start(..., run_at=...)"
)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """True in the run's event loop (an async workflow), False in a sync workflow's thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def schedule(
    live: LiveView,
    workflow: WorkflowDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    run_at: Any,
    delay: Any,
) -> Any:
    """Start (or, on replay, find) a detached run of `workflow`, at `run_at` or after `delay`.

    A ScheduledRun in an async workflow, the run's id in a sync one.
    """
    key = live.journal.next_key(journal.op_name(KIND, workflow.name))
    if not _on_loop(live.env.loop):
        return live.deliver(_blocking(live, key, workflow, args, kwargs, run_id, run_at, delay))
    done: asyncio.Future[str] = live.env.loop.create_future()
    record = live.journal.take(key, KIND)
    if record is not None:
        done.set_result(run_id_of(live, record))
        return ScheduledRun(done)
    live.journal.refuse_if_leaving()  # in a `finally:` of a run that parks: not now
    child, entry, unstored = _new(live, key, workflow, args, kwargs, run_id, run_at, delay)
    _point(live, key)
    # The history position is taken now, so the history shows the start where it was
    # called even when a later step's outcome is written first.
    entry.seq = live.journal.allocate_seq()
    replayed = live.journal.caught_up()
    write = _write(live, key, child, entry, replayed, unstored)
    return live.attempt.scheduled.add(live.env.loop, write)


async def _blocking(
    live: LiveView,
    key: str,
    workflow: WorkflowDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    run_at: Any,
    delay: Any,
) -> str:
    """A sync workflow's call: the thread waits, as for any durable call."""
    record = live.journal.take(key, KIND)
    if record is not None:
        return run_id_of(live, record)
    child, entry, unstored = _new(live, key, workflow, args, kwargs, run_id, run_at, delay)
    await live.journal.check_new_work(journal.started(KIND, key))
    await live.point(key)
    entry.seq = live.journal.allocate_seq()
    return await _write(live, key, child, entry, True, unstored)


def _new(
    live: LiveView,
    key: str,
    workflow: WorkflowDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    run_at: Any,
    delay: Any,
) -> tuple[RunRecord, StepRecord, dict[str, Any] | None]:
    """The run to create, its journal entry (seq to be set), and its arguments if unstored.

    Refused work raises here (bad arguments, a value the serializer cannot store); large
    arguments the blob store does not take now are stored by `_write` (its args "").
    """
    running = live.attempt.workflow
    if not running.durable:
        raise TransientWorkflow(running.name, NO_SCHEDULES)
    if not workflow.durable and not live.env.ephemeral:
        raise TransientWorkflow(workflow.name, NOT_SCHEDULED)
    # Checked and converted like any start's (InvalidArguments, a TypeError, at the call).
    args, kwargs = arguments.fit(workflow.fn, args, kwargs, workflow=workflow.name)
    now = live.env.clock.now()
    wake_at = start_times.start_at(now, delay, run_at, caller="cairn.schedule_workflow")
    unstored: dict[str, Any] | None = None
    try:
        child = children.new_run(
            live, key, workflow, args, kwargs, run_id, detached=True, wake_at=wake_at
        )
    except BlobUnwritable:  # not the call's fault: its arguments are waited out in `_write`
        unstored = {"args": list(args), "kwargs": kwargs}
        child = children.new_run(
            live, key, workflow, args, kwargs, run_id, detached=True, wake_at=wake_at, args_text=""
        )
    # What the parent's history shows: the run, and when it may start (None: at once).
    at = None if wake_at is None else datetime.fromtimestamp(wake_at, UTC).isoformat()
    facts = {"run_id": child.run_id, "workflow": workflow.name, "run_at": at}
    entry = StepRecord(
        run_id=live.run.run_id,
        seq=0,
        key=key,
        kind=KIND,
        name=workflow.name,
        status="completed",
        attempts=1,
        started_at=now,
        finished_at=now,
        result=json.dumps(facts),
        input=step_input.serialize(live.env.serializer, args, kwargs, hidden=live.hook_tokens),
    )
    return child, entry, unstored


def _point(live: LiveView, key: str) -> None:
    """The durable point of the call, acted on at once (see LiveSteps.point).

    A cancel is raised into the code here and journaled by the attempt before it writes
    anything else (the write below records it first); a pause or hand back parks the run.
    """
    interrupts = live.interrupts
    if interrupts.cancel or interrupts.pause or interrupts.handing_back:
        try:
            interrupts.checkpoint(key)
        except (Suspend, HandBack) as leaving:
            raise live.leave(leaving) from None


async def _write(
    live: LiveView,
    key: str,
    child: RunRecord,
    entry: StepRecord,
    replayed: bool,
    unstored: dict[str, Any] | None,
) -> str:
    """Store `unstored` arguments, create the run, then journal the start; the run's id.

    A cancel or hand back asked while the blob store does not take the arguments unwinds
    the attempt (see durable.stored): the next replays to the call and meets it there.
    """
    if not replayed:  # other branches of a gather were replaying at the call
        await live.journal.check_replayed(journal.started(KIND, key))
    await live.record_cancel()
    env = live.env
    if unstored is not None:
        what = f"arguments of workflow {child.workflow!r}"
        text = await durable.stored(live, env, unstored, what, live.interrupts.asked)
        child = replace(child, args=text)
    # Creating it is idempotent (its id is derived from this run's), so it is simply
    # sent again while the database is away; a run that has the id already is the one
    # started (a given run_id, as engine.start, or this call's before a crash).
    await durable.write(
        live, lambda: env.store.write(run_ops.create_run(child)), what=f"run {child.run_id!r}"
    )
    await durable.write(
        live,
        lambda: env.store.write(journal_ops.upsert_step(live.lease, entry)),
        what=f"the start {key!r}",
    )
    live.journaled = True
    if env.on_new_work is not None:
        env.on_new_work()
    return child.run_id


def run_id_of(live: LiveView, record: StepRecord) -> str:
    """The id of the run a recorded start started."""
    facts = json.loads(record.result or "{}")
    return str(facts.get("run_id", "")) if isinstance(facts, dict) else ""
