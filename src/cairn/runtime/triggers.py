"""Event triggers: `engine.emit` starts the workflows subscribed with `on=`, once per key.

Subscriptions are stored when an engine with workers opens, so a Client or CLI without
the workflow code can emit too. An emit with no subscriber starts nothing, returns []
and remembers nothing (a key emitted then can start runs later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cairn.core import emits
from cairn.observability import propagation
from cairn.runtime.handle import RunHandle
from cairn.store.programs import schedules

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView


async def declare(control: ControlView) -> None:
    """Store the event type each workflow of the registry subscribes to (or none)."""
    workflows = [
        (wf.name, wf.on if isinstance(wf.on, str) and wf.on else None, wf.queue, wf.max_recoveries)
        for wf in control.registry.workflows.values()
    ]
    if workflows:  # none: no transaction at all
        await control.store.write(schedules.sync_subscriptions(workflows, now=control.clock.now()))


async def emit(
    control: ControlView, event_type: str, payload: Any = None, *, key: str | None = None
) -> list[RunHandle]:
    """Start every workflow subscribed to `event_type` with `payload` as its one argument.

    With a `key`, the (event type, key) pair is remembered: emitting it again starts
    nothing and returns the same runs.
    """
    emits.check(event_type, key)
    args = control.serializer.dumps(emits.args_of(payload), what=f"payload of event {event_type!r}")
    run_ids = await control.store.write(
        schedules.emit_event(
            event_type,
            args,
            key=key,
            now=control.clock.now(),
            local=emits.local_subscribers(control.registry, event_type),
            trace_context=propagation.current(),
        )
    )
    if run_ids:
        control.wake_local()
    return [RunHandle(control, run_id) for run_id in run_ids]
