"""`cairn.emit` inside a run: a durable operation that starts the subscribed workflows.

The runs are created and the emit is journaled (with their ids) in one transaction, so a
crash either leaves no trace or a recorded emit that replay returns without starting
anything again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.authoring.registry import Registry
from cairn.core import durable, journal
from cairn.errors import TransientWorkflow
from cairn.names import check_name
from cairn.observability import propagation
from cairn.store.programs import schedules
from cairn.store.records import StepRecord, Subscription

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView

NO_EMITS = (
    "it cannot emit events: the runs an emit starts must outlive this process; emit from a "
    "durable workflow or with engine.emit()"
)


def check(event_type: Any, key: Any) -> None:
    """ValueError for an event type or key that is not a non-empty string."""
    check_name(event_type, "event type")
    if key is not None:
        check_name(key, f"emit key for {event_type!r}")


def local_subscribers(registry: Registry, event_type: str) -> list[Subscription]:
    """The workflows of `registry` declared with `on=event_type`."""
    return [
        Subscription(event_type, wf.name, wf.queue, wf.max_recoveries)
        for wf in registry.workflows.values()
        if wf.on == event_type
    ]


def args_of(payload: Any) -> dict[str, Any]:
    """The stored arguments of a triggered run: the payload as its single argument."""
    return {"args": [payload], "kwargs": {}}


async def emit(live: LiveView, event_type: str, payload: Any, key: str | None) -> list[str]:
    """Start (or, on replay, find) the runs of an emit; their ids."""
    journal_key = live.journal.next_key(journal.op_name("emit", event_type))
    record = live.journal.take(journal_key, "emit")
    if record is not None:
        return [str(run_id) for run_id in await live.replayed(record)]
    emitter = live.env.registry.workflows.get(live.run.workflow)
    if emitter is not None and not emitter.durable:
        raise TransientWorkflow(emitter.name, NO_EMITS)
    await live.journal.check_new_work(journal.started("emit", journal_key))
    await live.point(journal_key)
    env = live.env
    what = f"payload of event {event_type!r}"
    args = await durable.value_text(live, env, args_of(payload), what, live.interrupts.asked)
    now = env.clock.now()
    step = StepRecord(
        run_id=live.run.run_id,
        seq=live.journal.allocate_seq(),
        key=journal_key,
        kind="emit",
        name=event_type,
        status="completed",
        attempts=1,
        started_at=now,
        finished_at=now,
    )
    local = local_subscribers(env.registry, event_type)
    run_ids = await durable.write(
        live,
        lambda: env.store.write(
            schedules.emit_event(
                event_type,
                args,
                key=key,
                now=now,
                local=local,
                lease=live.lease,
                step=step,
                # The runs it starts go on in the emitting run's trace, as its children do.
                trace_context=propagation.current() or live.run.trace_context,
            )
        ),
        what=f"emit of {event_type!r}",
    )
    if run_ids and env.on_new_work is not None:
        env.on_new_work()
    return run_ids
