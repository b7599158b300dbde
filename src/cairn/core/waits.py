"""Waiting for the outside world: events, hook calls and human-task submissions.

All three are messages on a channel of the run. A wait first tries to consume one; if
none is queued it records its deadline once ("waiting" journal entry) and parks the run
as WAITING, holding no worker slot. A message makes the run due, it replays to the wait
and consumes the message atomically with recording the outcome.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cairn.authoring.context import MISSING
from cairn.core import durable, hook_tokens, journal
from cairn.core.signals import Suspend, Unwind
from cairn.errors import EventTimeout
from cairn.models import RunStatus
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import waits as wait_ops
from cairn.store.records import HookRecord, StepRecord

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView
    from cairn.store import Store
    from cairn.store.records import Lease

# Commits a wait's outcome from what is queued on its channel: its stored result, or None
# (nothing written) when nothing is.
Take = Callable[[StepRecord], Awaitable[str | None]]


def _take_oldest(
    store: Store, lease: Lease, channel: str, entry: StepRecord
) -> Awaitable[str | None]:
    """The default `Take`: the oldest message queued on `channel`."""
    return store.write(wait_ops.consume_message(lease, channel, entry))


def waiting_record(
    live: LiveView, key: str, kind: str, name: str, seq: int, facts: dict[str, Any]
) -> StepRecord:
    """A "waiting" journal entry; `facts` (deadline, token, task id) survive restarts."""
    now = live.env.clock.now()
    return StepRecord(
        run_id=live.run.run_id,
        seq=seq,
        key=key,
        kind=kind,
        name=name,
        status="waiting",
        attempts=1,
        started_at=now,
        finished_at=None,
        result=json.dumps(facts),
    )


def facts_of(record: StepRecord) -> dict[str, Any]:
    """The facts stored in a "waiting" entry."""
    data = json.loads(record.result or "{}")
    return data if isinstance(data, dict) else {}


async def wait_message(
    live: LiveView,
    *,
    key: str,
    kind: str,
    name: str,
    channel: str,
    record: StepRecord | None,
    deadline: float | None,
    default: Any = MISSING,
    facts: dict[str, Any] | None = None,
    unsaved: bool = False,
    take: Take | None = None,
    timeout_result: str | None = None,
    waits_for: str | None = None,
) -> Any:
    """Return the payload of the next message on `channel`, parking the run until one comes.

    `record` is the entry already journaled for `key` (None for a wait never started), or
    with `unsaved` an entry to journal when the run parks (its facts changed). A child's
    timeout entry keeps its facts, so a replay knows which run it waited for.
    `take` commits the outcome from what is queued (default: the oldest message), its
    stored result or None; `timeout_result` is the stored result of a timeout; and
    `waits_for` what a parked run's `waiting_for` says (default "KIND:NAME").
    """
    store, lease = live.env.store, live.lease
    if take is None:
        take = functools.partial(_take_oldest, store, lease, channel)
    label = waits_for or f"{kind}:{name}"
    if record is not None and record.status == "completed":
        live.ctx.received_at = record.finished_at
        return await live.replayed(record)
    if record is not None and record.status == "timeout":
        return timed_out(kind, name, default)
    if live.journal.closed:  # a branch going on after another one parked the run
        raise Unwind()
    await live.point(key)
    if record is not None:
        seq = record.seq
        deadline = facts_of(record).get("deadline")
    else:
        seq = live.journal.allocate_seq()
    clock = live.env.clock
    done = StepRecord(
        run_id=live.run.run_id,
        seq=seq,
        key=key,
        kind=kind,
        name=name,
        status="completed",
        attempts=1,
        started_at=record.started_at if record is not None else clock.now(),
        finished_at=clock.now(),
    )
    # Open until a message or its timeout ends it: a run that parks wakes for a message
    # on the channel of one of its open waits (and no other), or at their first deadline.
    live.attempt.waits[key] = (channel, deadline, label)
    deciding = live.attempt.deciding()
    parked = False
    try:
        payload = await durable.write(live, lambda: take(done), what=f"{kind} {name!r}")
        if payload is not None:
            live.journaled = True
            live.ctx.received_at = done.finished_at
            return await live.values.loads_async(payload, key)
        if deadline is not None and clock.now() >= deadline:
            live.journaled = True
            kept = None if record is None or kind != "child" else record.result
            kept = timeout_result if timeout_result is not None else kept
            timeout = StepRecord(**{**_fields(done), "status": "timeout", "result": kept})
            await durable.write(
                live,
                lambda: store.write(journal_ops.upsert_step(lease, timeout)),
                what=f"the timeout of {key!r}",
            )
            return timed_out(kind, name, default)
        if record is None or unsaved:
            if record is None:
                info = {**(facts or {}), "deadline": deadline, "channel": channel}
                waiting = waiting_record(live, key, kind, name, seq, info)
            else:
                waiting = record
            live.journaled = True
            await durable.write(
                live,
                lambda: store.write(journal_ops.upsert_step(lease, waiting)),
                what=f"{key!r}",
            )
        # Let sibling branches of a gather reach their own waits before the run parks.
        for _ in range(3):
            await asyncio.sleep(0)
        parked = True
        raise live.leave(Suspend(RunStatus.WAITING.value, deadline, label))
    finally:
        live.attempt.decided(deciding)
        if not parked:  # taken, timed out, or given up (cancelled, the attempt ended)
            live.attempt.waits.pop(key, None)


def _fields(record: StepRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in StepRecord.__dataclass_fields__}


def timed_out(kind: str, name: str, default: Any) -> Any:
    """A timed-out wait's outcome, live or replayed: `default` if given, else EventTimeout."""
    if default is not MISSING:
        return default
    raise EventTimeout(f"{kind} {name!r} timed out")


async def wait_for_event(
    live: LiveView, name: str, timeout: float | None, default: Any = MISSING
) -> Any:
    """`cairn.wait_for_event`: the next event `name` sent to this run (FIFO)."""
    key = live.journal.next_key(journal.op_name("event", name))
    record = live.journal.take(key, "event")
    if record is None:
        await live.journal.check_new_work(journal.started("event", key))
    deadline = None if timeout is None else live.env.clock.now() + timeout
    return await wait_message(
        live,
        key=key,
        kind="event",
        name=name,
        channel=f"event:{name}",
        record=record,
        deadline=deadline,
        default=default,
    )


async def open_hook(
    live: LiveView, name: str, timeout: float | None, schema: Any = None
) -> tuple[str, float | None, StepRecord]:
    """Create (or, on replay, find) the hook: its token, expiry and journal entry.

    `schema` (a JSON Schema dict or a pydantic model class, as a human task's form) is
    stored with the hook; `engine.resume_hook` checks payloads against it.
    """
    from cairn.authoring import forms

    key = live.journal.next_key(journal.op_name("hook", name))
    record = live.journal.take(key, "hook")
    if record is not None:
        facts = facts_of(record) if record.status == "waiting" else {}
        return str(facts.get("token", "")), facts.get("deadline"), record
    await live.journal.check_new_work(journal.started("hook", key))
    schema_text, model_path = forms.describe_form(schema, what=f"schema of hook {name!r}")
    token = hook_tokens.new_token()
    stored = hook_tokens.digest(token)
    now = live.env.clock.now()
    deadline = None if timeout is None else now + timeout
    facts = {"token": token, "deadline": deadline, "channel": f"hook:{stored}"}
    record = waiting_record(live, key, "hook", name, live.journal.allocate_seq(), facts)
    hook = HookRecord(
        token=stored,
        run_id=live.run.run_id,
        name=name,
        created_at=now,
        expires_at=deadline,
        payload_schema=schema_text,
        payload_model=model_path,
    )
    store, lease = live.env.store, live.lease
    await durable.write(
        live, lambda: store.write(wait_ops.create_hook(lease, record, hook)), what=f"hook {name!r}"
    )
    return token, deadline, record


async def await_hook(live: LiveView, name: str, record: StepRecord, schema: Any = None) -> Any:
    """Wait for the hook's single call; a model instance when `schema` is a pydantic model."""
    facts = facts_of(record) if record.status == "waiting" else {}
    payload = await wait_message(
        live,
        key=record.key,
        kind="hook",
        name=name,
        channel=str(facts.get("channel", "")),
        record=record,
        deadline=facts.get("deadline"),
    )
    return as_model(schema, payload)


def as_model(form: Any, values: Any) -> Any:
    """`values` as an instance of `form` when it is a pydantic model class, else as they are."""
    if isinstance(form, type) and hasattr(form, "model_validate"):
        return form.model_validate(values)
    return values


async def human_task(
    live: LiveView,
    name: str,
    title: str,
    data: Any,
    form: Any,
    assignee: str | None,
    timeout: float | None,
) -> Any:
    """`cairn.human_task`: create a task for a person and wait for its submitted values."""
    import uuid

    from cairn.authoring import forms
    from cairn.store.records import TaskRecord

    key = live.journal.next_key(journal.op_name("task", name))
    record = live.journal.take(key, "task")
    if record is None:
        await live.journal.check_new_work(journal.started("task", key))
        schema, model_path = forms.describe_form(form)
        what = f"data of human task {name!r}"
        data_text = await durable.value_text(live, live.env, data, what, live.interrupts.asked)
        now = live.env.clock.now()
        deadline = None if timeout is None else now + timeout
        task_id = uuid.uuid4().hex
        record = waiting_record(
            live,
            key,
            "task",
            name,
            live.journal.allocate_seq(),
            {"task_id": task_id, "deadline": deadline, "channel": f"task:{task_id}"},
        )
        task = TaskRecord(
            task_id=task_id,
            run_id=live.run.run_id,
            name=name,
            title=title,
            data=data_text,
            form=schema,
            form_model=model_path,
            assignee=assignee,
            status="open",
            created_at=now,
            due_at=deadline,
        )
        live.spawned = True
        store, lease, entry = live.env.store, live.lease, record
        await durable.write(
            live,
            lambda: store.write(wait_ops.create_task(lease, entry, task)),
            what=f"human task {name!r}",
        )
    facts: dict[str, Any] = facts_of(record) if record.status == "waiting" else {}
    try:
        values = await wait_message(
            live,
            key=key,
            kind="task",
            name=name,
            channel=str(facts.get("channel", "")),
            record=record,
            deadline=facts.get("deadline"),
        )
    except EventTimeout:
        await live.env.store.write(
            wait_ops.close_tasks(live.run.run_id, "expired", facts.get("task_id"))
        )
        raise
    return as_model(form, values)
