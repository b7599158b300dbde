"""Child runs: a workflow called inside a workflow runs as its own run, awaited by the parent.

The child's id is derived from the parent's id and the call's key, so a parent that
crashes between starting a child and recording it finds the same child again. A finished
child messages its parent in the transaction that finishes it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cairn import arguments, durations
from cairn.core import durable, journal
from cairn.core.waits import facts_of, wait_message, waiting_record
from cairn.errors import Cancelled, ChildFailed, EventTimeout, TransientWorkflow
from cairn.models import RunStatus
from cairn.observability import propagation
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import waits
from cairn.store.records import RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef
    from cairn.core.live_view import LiveView

NOT_A_CHILD = (
    "a durable run cannot start it as a child (the child would be lost with this process "
    "while its parent waits on); make it durable, or call its steps from the parent"
)


# How a child cancelled before it started (queued, or paused first) ended, as the parent
# reads it: like any cancelled child's end, whose error is a Cancelled.
NEVER_STARTED = {
    "type": f"{Cancelled.__module__}.{Cancelled.__qualname__}",
    "message": "cancelled before it started",
}


class ChildHandle:
    """A child run started with `cairn.start_child`; `await handle.result()` waits for it."""

    __slots__ = ("_child_id", "_end", "_live", "_record", "_timeouts", "run_id", "workflow")

    def __init__(self, live: LiveView, workflow: str, run_id: str, record: StepRecord) -> None:
        self._live = live
        self.workflow = workflow
        self.run_id = run_id
        self._record = record
        # result() calls that timed out so far. Each later call waits under a journal entry
        # of its own, for the run the last one reached (a successor after continue_as_new).
        self._timeouts = 0
        self._child_id = run_id
        # The id of the run that ended the chain, its end's message, and the key of the
        # wait that took it, once received.
        self._end: tuple[str, dict[str, Any], str] | None = None

    def __repr__(self) -> str:
        return f"ChildHandle({self.run_id!r})"

    def result(self, timeout: Any = None) -> Any:
        """The child's result.

        An awaitable in async workflows; the value itself in sync ones.

        Args:
            timeout: How long to wait (a duration); None waits until the child ends. The
                deadline is recorded at the call, so a replay keeps it. The child goes on
                running after a timeout, and result() may be called again.

        Raises:
            ChildFailed: The child ended FAILED or CANCELLED.
            TimeoutError: The timeout passed first (as from RunHandle.result).
            ValueError: A bad timeout.
        """
        seconds = None
        if timeout is not None:
            seconds = durations.seconds(timeout, what=f"timeout of child {self.run_id!r}")
        return self._live.deliver(child_result(self._live, self, seconds))


async def start_child(
    live: LiveView,
    workflow: WorkflowDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    run_id: str | None,
    detached: bool,
) -> ChildHandle:
    """Start (or, on replay, find) a child run of `workflow`."""
    key = live.journal.next_key(journal.op_name("child", workflow.name))
    record = live.journal.take(key, "child")
    if record is not None:
        if record.status in ("waiting", "timeout"):
            child_id = str(facts_of(record)["child_id"])
        else:
            outcome = live.values.loads(record.result or "{}")
            child_id = str(outcome.get("run_id", "")) if isinstance(outcome, dict) else ""
        return ChildHandle(live, workflow.name, child_id, record)
    if not workflow.durable and not live.env.ephemeral:
        raise TransientWorkflow(workflow.name, NOT_A_CHILD)
    # Checked and converted like any start's (InvalidArguments, a TypeError, in the parent).
    args, kwargs = arguments.fit(workflow.fn, args, kwargs, workflow=workflow.name)
    await live.journal.check_new_work(journal.started("child", key))
    await live.point(key)
    env = live.env
    what = f"arguments of workflow {workflow.name!r}"
    value = {"args": list(args), "kwargs": kwargs}
    text = await durable.value_text(live, live.env, value, what, live.interrupts.asked)
    child = new_run(live, key, workflow, args, kwargs, run_id, detached=detached, args_text=text)
    child_id = child.run_id
    facts = {"child_id": child_id, "channel": f"child:{child_id}", "deadline": None}
    record = waiting_record(live, key, "child", workflow.name, live.journal.allocate_seq(), facts)
    live.spawned = True
    # Creating the child is idempotent (its id is derived from the parent's), so it is
    # simply sent again while the database is away.
    existing, created = await durable.write(
        live, lambda: env.store.write(run_ops.create_run(child)), what=f"child run {child_id!r}"
    )
    if not created:
        await _adopt(live, existing, key)
    await durable.write(
        live,
        lambda: env.store.write(journal_ops.upsert_step(live.lease, record)),
        what=f"child {key!r}",
    )
    if env.on_new_work is not None:
        env.on_new_work()
    return ChildHandle(live, workflow.name, child_id, record)


def derived_id(live: LiveView, key: str) -> str:
    """The id of the run started at journal `key`: the parent's id, then the key.

    `PARENT/NAME#1` for a child, `PARENT/schedule:NAME#1` for a scheduled run.

    Derived, not random, so that an attempt that crashed between creating the run and
    journaling it finds the same run again.
    """
    return f"{live.run.run_id}/{key.removeprefix('~child:').removeprefix('~')}"


def new_run(
    live: LiveView,
    key: str,
    workflow: WorkflowDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    *,
    detached: bool,
    wake_at: float | None = None,
    args_text: str | None = None,
) -> RunRecord:
    """The PENDING run a parent starts at journal `key` (at `wake_at`, if given).

    `args_text`: its arguments as stored already (else stored here, on the loop).
    """
    env = live.env
    now = env.clock.now()
    if args_text is None:
        args_text = env.serializer.dumps(
            {"args": list(args), "kwargs": kwargs}, what=f"arguments of workflow {workflow.name!r}"
        )
    return RunRecord(
        run_id=run_id or derived_id(live, key),
        workflow=workflow.name,
        status=RunStatus.PENDING.value,
        args=args_text,
        created_at=now,
        updated_at=now,
        max_recoveries=workflow.max_recoveries,
        wake_at=wake_at,
        parent_id=live.run.run_id,
        queue=workflow.queue,
        detached=1 if detached else 0,
        version=workflow.version,
        # Under the parent's span when it is traced here, else in the parent's trace.
        trace_context=propagation.current() or live.run.trace_context,
        origin="parent",
    )


async def child_result(live: LiveView, handle: ChildHandle, timeout: float | None = None) -> Any:
    """Wait for the child (following continue_as_new) and return its result."""
    if handle._end is None:
        handle._end = await _wait_for_end(live, handle, timeout)
    child_id, message, key = handle._end
    status = message.get("status")
    if status == RunStatus.COMPLETED.value:
        result = message.get("result")
        return None if result is None else await live.values.loads_async(result, key)
    error = live.values.unseal_json(message.get("error")) or {}
    if status == RunStatus.CANCELLED.value and not error:
        error = NEVER_STARTED  # its end stored no error: it ran no code
    raise ChildFailed(
        f"child run {child_id!r} ({handle.workflow}) ended {status}: {error.get('message', '')}",
        run_id=child_id,
        error_type=error.get("cause_type") or error.get("type", ""),
        error_message=error.get("message", ""),
        traceback=error.get("traceback", ""),
    )


async def _wait_for_end(
    live: LiveView, handle: ChildHandle, timeout: float | None
) -> tuple[str, dict[str, Any], str]:
    """The id of the run that ended the child's chain, the message its end sent, its key.

    A timeout's deadline goes into the wait's journal entry when the run parks, and the
    successors' entries carry it on, so every replay of the call keeps the same deadline.
    """
    record, unsaved = await _wait_entry(live, handle)
    base = record.key
    facts = facts_of(record) if record.status in ("waiting", "timeout") else {}
    child_id = str(facts.get("child_id", handle._child_id))
    deadline = facts.get("deadline")
    if record.status == "waiting" and deadline is None and timeout is not None:
        deadline = live.env.clock.now() + timeout
        record = replace(record, result=json.dumps({**facts, "deadline": deadline}))
        unsaved = True
    key = base
    hop = 0
    while True:
        try:
            message = await wait_message(
                live,
                key=key,
                kind="child",
                name=handle.workflow,
                channel=f"child:{child_id}",
                record=record,
                deadline=deadline,
                unsaved=unsaved,
            )
        except EventTimeout:
            handle._timeouts += 1
            handle._child_id = child_id
            raise TimeoutError(
                f"child run {child_id!r} ({handle.workflow}) did not finish in time"
                + ("" if timeout is None else f" ({timeout:g}s)")
            ) from None
        if message.get("status") != RunStatus.CONTINUED.value:
            return child_id, message, key
        # The child went on as a new run: wait for that one under a key of its own.
        child_id = str(message.get("result"))
        hop += 1
        key = f"{base}>{hop}"
        unsaved = False
        found = live.journal.take(key, "child")
        if found is None:
            facts = {"child_id": child_id, "channel": f"child:{child_id}", "deadline": deadline}
            found = waiting_record(
                live, key, "child", handle.workflow, live.journal.allocate_seq(), facts
            )
            await _record_wait(live, found)
        elif found.status in ("waiting", "timeout"):
            deadline = facts_of(found).get("deadline")
        record = found


async def _wait_entry(live: LiveView, handle: ChildHandle) -> tuple[StepRecord, bool]:
    """The journal entry this result() call waits under; True if it is not journaled yet.

    The first call waits under the start's entry; a call after a timeout under one of its
    own, since the timed-out entry keeps its outcome for replays.
    """
    if handle._timeouts == 0:
        return handle._record, False
    key = f"{handle._record.key}@{handle._timeouts + 1}"
    record = live.journal.take(key, "child")
    if record is not None:
        return record, False
    await live.journal.check_new_work(journal.waited_again(key))
    child_id = handle._child_id
    facts = {"child_id": child_id, "channel": f"child:{child_id}", "deadline": None}
    seq = live.journal.allocate_seq()
    return waiting_record(live, key, "child", handle.workflow, seq, facts), True


async def _record_wait(live: LiveView, record: StepRecord) -> None:
    """Journal the wait for a child's successor (after a continue_as_new)."""
    await durable.write(
        live,
        lambda: live.env.store.write(journal_ops.upsert_step(live.lease, record)),
        what=f"child {record.key!r}",
    )


async def _adopt(live: LiveView, existing: RunRecord, key: str) -> None:
    """`start_child(..., run_id=X)` where run X exists: the handle is to that run.

    Its steps do not run again (DBOS semantics). A finished run's outcome is delivered to
    this parent at once, as its end would have been; an unfinished child of this parent
    tells it when it ends. An unfinished run of someone else would never tell this run:
    that is refused, naming it.
    """
    env = live.env
    status = RunStatus(existing.status)
    own = existing.parent_id == live.run.run_id
    if status.finished and own and not _waited_before(live, existing.run_id, key):
        return  # its own end told this run, and that message is still unread
    if status.finished:
        message = json.dumps(
            {
                "run_id": existing.run_id,
                "status": existing.status,
                "result": existing.continued_to
                if status is RunStatus.CONTINUED
                else existing.result,
                "error": existing.error,
            }
        )
        await durable.write(
            live,
            lambda: env.store.write(
                waits.send_message(
                    live.run.run_id,
                    f"child:{existing.run_id}",
                    message,
                    idempotency_key=f"adopt:{key}",
                    now=env.clock.now(),
                )
            ),
            what=f"the outcome of run {existing.run_id!r}",
        )
        return
    if existing.parent_id != live.run.run_id:
        raise ValueError(
            f"child run_id {existing.run_id!r} is taken by an unfinished run that is not a "
            "child of this run; pick another run_id"
        )


def _waited_before(live: LiveView, child_id: str, key: str) -> bool:
    """True if another call of this run waits or waited for run `child_id`'s end.

    That call consumes the message the child's end sent, so this one needs its own.
    """
    for record in live.journal.recorded.values():
        if record.kind != "child" or record.key == key:
            continue
        try:
            found = json.loads(record.result or "{}")
        except ValueError:
            continue
        if isinstance(found, dict) and child_id in (found.get("run_id"), found.get("child_id")):
            return True
    return False
