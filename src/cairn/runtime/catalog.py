"""The workflows known where runs are started: this process's registry and the live workers'.

Workers store only the names of the workflows they execute (durable ones: they never
claim a transient workflow), so a workflow only they know has no queue, version or
`on` to show here. A worker that does not say what it executes (older cairn) adds none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cairn.runtime import leases
from cairn.store.programs import workers as worker_ops

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView


@dataclass(frozen=True, slots=True)
class WorkflowInfo:
    """A workflow, and who knows it."""

    name: str
    """Its registered name."""
    queue: str | None
    """The queue its runs go to (None: none, or only workers know it)."""
    version: str | None
    """Its `version=` (None: none given, or only workers know it)."""
    on: str | None
    """The event type that starts it (None: none, or only workers know it)."""
    durable: bool | None
    """False for a transient workflow; None when only workers know it (they are durable)."""
    local: bool
    """True if this process registers it (its modules are imported here)."""
    workers: tuple[str, ...]
    """Ids of the live workers that execute it, sorted."""


def _names(text: str | None) -> list[str]:
    try:
        names = json.loads(text) if text else []
    except ValueError:
        return []
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


async def workflows(control: ControlView) -> list[WorkflowInfo]:
    """Every workflow this process registers or a live worker executes, by name."""
    now = control.clock.now()
    known_by: dict[str, list[str]] = {}
    for worker in await control.store.read(worker_ops.list_workers()):
        if leases.alive(worker, now):
            for name in _names(worker.workflows):
                known_by.setdefault(name, []).append(worker.worker_id)
    found = []
    for name in sorted(set(control.registry.workflows) | set(known_by)):
        defn = control.registry.workflows.get(name)
        found.append(
            WorkflowInfo(
                name=name,
                queue=defn.queue if defn else None,
                version=defn.version if defn else None,
                on=defn.on if defn else None,
                durable=defn.durable if defn else None,
                local=defn is not None,
                workers=tuple(sorted(known_by.get(name, ()))),
            )
        )
    return found
