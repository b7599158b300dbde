"""Steps on a step queue: each attempt executes on a worker serving the queue, not here.

`@cairn.step(queue="gpu")`: the run stores the attempt for the queue's workers
(store/programs/step_tasks.py) and parks as WAITING, holding no slot and no thread. The
worker that executes it (runtime/step_worker.py) reports the outcome as a message on a
channel of the run kept for that attempt; the message wakes the run, which journals the
report as a "remote" entry (where it ran: queue and worker) and then treats it as a local
attempt's outcome: the result committed as the step's, or a failed attempt recorded and
retried by the step's Retry policy (a long backoff parks the run on a cairn timer).

The run never executes such a step itself, whatever queues its own worker serves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cairn import blobs
from cairn.authoring.definitions import StepDef
from cairn.blobs import BlobUnwritable
from cairn.core import durable, failed_attempts, step_input, waits
from cairn.core.journal import Journal
from cairn.errors import Cancelled, InvalidArguments
from cairn.observability import propagation
from cairn.store.programs import step_tasks
from cairn.store.records import INTERRUPTED, StepRecord, StepTaskRecord

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView

# Journal kind of an attempt's report, and the prefix of its key: "~remote:KEY@ATTEMPT".
REMOTE = "remote"
_PREFIX = "~remote:"
# What a run parked on a remote attempt is `waiting_for`: "step:NAME@QUEUE".
WAITING = "step"


def report_key(key: str, attempt: int) -> str:
    """The journal key of the report of attempt `attempt` of the step at `key`."""
    return f"{_PREFIX}{key}@{attempt}"


def channel(execution: int, key: str, attempt: int) -> str:
    """The run's message channel of one attempt (per execution: a retried run sends anew)."""
    return f"{_PREFIX}{execution}:{key}@{attempt}"


def task_id(run_id: str, execution: int, key: str, attempt: int) -> str:
    """The id of one attempt in `step_tasks`: one per run, execution, step and attempt."""
    return f"{run_id}/{execution}/{key}@{attempt}"


def target_of(fn: Any, name: str) -> str:
    """`module:qualname` of a `cairn.run_step(..., queue=)` function, checked importable."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or not qualname or "<" in qualname:
        raise InvalidArguments(
            f"cairn.run_step {name!r} with queue= needs a module-level function (the "
            f"queue's workers import it by name), got {fn!r}"
        )
    return f"{module}:{qualname}"


def resolve_target(target: str) -> Any:
    """The function `target_of` named (ImportError or AttributeError if it is gone)."""
    module, _, qualname = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def take_reports(journal: Journal, key: str) -> list[StepRecord]:
    """Replay the reports recorded for the step at `key`, in attempt order."""
    reports = []
    attempt = 1
    while report_key(key, attempt) in journal.recorded:
        record = journal.take(report_key(key, attempt), REMOTE)
        if record is not None:
            reports.append(record)
        attempt += 1
    return reports


async def run_remote_step(
    live: LiveView,
    key: str,
    step: StepDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    reports: list[StepRecord],
    target: str | None = None,
) -> Any:
    """Have the step at `key` executed on its queue; its result, or its failure raised."""
    name = step.name
    serializer = live.env.serializer
    prior = live.prior_attempts.get(key, ())
    failed = {earlier.attempt for earlier in prior}
    spared = sum(1 for earlier in prior if earlier.outcome == INTERRUPTED)
    given = (
        step_input.serialize(serializer, args, kwargs, hidden=live.hook_tokens)
        if step.keep_input
        else step_input.NOT_KEPT
    )
    attempt = 0
    out: StepRecord | None = None  # a report still awaited (journaled "waiting")
    for record in reports:
        attempt += 1
        if record.status != "completed":
            out = record
            break
        facts = await live.values.loads_async(record.result or "{}", record.key)  # maybe offloaded
        if facts.get("ok"):  # reported, but the step's outcome not committed yet
            return await _completed(live, key, name, attempt, facts, given)
        if attempt in failed:
            continue  # recorded and retried already
        failure = await failed_attempts.record_failure(
            live,
            key,
            name,
            failed_attempts.Failure.from_json(facts.get("failure") or {}),
            attempt,
            attempt - spared,
            step.retry,
            float(facts.get("started") or record.started_at or live.env.clock.now()),
            given,
            worker=facts.get("worker"),
        )
        if failure is not None:
            raise failure
    if out is None and prior and prior[-1].retry_at is not None:
        left = prior[-1].retry_at - live.env.clock.now()
        if left > failed_attempts.PARK_BACKOFF_AFTER:
            raise live.attempt.timer(key, prior[-1].retry_at, f"{failed_attempts.RETRY}:{name}")
        if left > 0:
            await failed_attempts.back_off(live, key, left)
    sent = await _arguments(live, name, [list(args), kwargs])
    while True:
        if out is None:
            attempt += 1
        try:
            facts = await _execute_remotely(live, key, step, attempt, out, sent, target)
        except Cancelled:
            await _cut_off(live, key, name, attempt)
            raise
        out = None
        if facts.get("ok"):
            return await _completed(live, key, name, attempt, facts, given)
        failure = await failed_attempts.record_failure(
            live,
            key,
            name,
            failed_attempts.Failure.from_json(facts.get("failure") or {}),
            attempt,
            attempt - spared,
            step.retry,
            float(facts.get("started") or live.env.clock.now()),
            given,
            worker=facts.get("worker"),
        )
        if failure is not None:
            raise failure


async def _arguments(live: LiveView, name: str, value: list[Any]) -> str:
    """The stored text of a step's arguments; a blob store that refuses it is waited out.

    As a step's result is (core/durable.py `stored`): large arguments are no fault of the
    run, and the queue's worker cannot be handed the attempt without them.
    """
    what = f"the arguments of step {name!r}"
    try:
        return await blobs.dumps_async(live.env.serializer, value, what=what)
    except BlobUnwritable:  # a coroutine more only then
        return await durable.stored(live, live.env, value, what, live.interrupts.asked)


async def _execute_remotely(
    live: LiveView,
    key: str,
    step: StepDef[Any, Any],
    attempt: int,
    record: StepRecord | None,
    sent: str,
    target: str | None,
) -> dict[str, Any]:
    """Send attempt `attempt` to the step's queue (once) and wait for its report."""
    queue = str(step.queue)
    run = live.run
    ident = task_id(run.run_id, run.execution, key, attempt)
    if record is None:  # not sent yet, or sent by an attempt that died before journaling
        task = StepTaskRecord(
            task_id=ident,
            run_id=run.run_id,
            key=key,
            attempt=attempt,
            step=step.name,
            target=target,
            queue=queue,
            input=sent,
            timeout=step.timeout,
            status="queued",
            worker_id=None,
            claims=0,
            lease_until=None,
            created_at=live.env.clock.now(),
            # The span of the run's attempt sending it, if one is current (this attempt
            # parks and its span ends, but the step's span is still its child).
            trace_context=propagation.current(),
        )
        store, lease = live.env.store, live.lease
        live.spawned = True  # its end closes the attempt if it is still open then
        await durable.write(
            live, lambda: store.write(step_tasks.enqueue(lease, task)), what=f"attempt {ident!r}"
        )
    facts: dict[str, Any] = await waits.wait_message(
        live,
        key=report_key(key, attempt),
        kind=REMOTE,
        name=step.name,
        channel=channel(run.execution, key, attempt),
        record=record,
        deadline=None,
        facts={"queue": queue, "task_id": ident},
        waits_for=f"{WAITING}:{step.name}@{queue}",
    )
    return facts


async def cut_off_awaited(live: LiveView, key: str, name: str, reports: list[StepRecord]) -> None:
    """`_cut_off` for the attempt whose report the replayed `reports` still await, if one."""
    for attempt, record in enumerate(reports, 1):
        if record.status != "completed":
            await _cut_off(live, key, name, attempt)
            return


async def _cut_off(live: LiveView, key: str, name: str, attempt: int) -> None:
    """Record the attempt a cancel of the run cut off on its queue's worker, as cancelled.

    Only one a worker holds (with that worker and its claim's start): an attempt still
    waiting for a worker ran nothing (it is never claimed now), and one reported already
    ended on its own. The worker stops it at its next lease renewal
    (runtime/step_worker.py).
    """
    ident = task_id(live.run.run_id, live.run.execution, key, attempt)
    record = failed_attempts.cancelled_attempt(live, key, name, attempt, live.env.clock.now())
    store, lease = live.env.store, live.lease
    live.journaled = True
    await durable.write(
        live,
        lambda: store.write(step_tasks.record_cut_off(lease, record, ident)),
        what=f"attempt {attempt} of {key!r}",
    )


async def _completed(
    live: LiveView, key: str, name: str, attempt: int, facts: dict[str, Any], given: str
) -> Any:
    """Commit a reported result as the step's outcome; the value the workflow gets."""
    now = live.env.clock.now()
    text = facts.get("result")
    record = StepRecord(
        live.run.run_id,
        live.journal.allocate_seq(),
        key,
        "step",
        name,
        "completed",
        attempt,
        float(facts.get("started") or now),
        float(facts.get("finished") or now),
        text,
        None,
        given,
    )
    await live.commit_step(record)
    return None if text is None else await live.values.loads_async(text, key)
