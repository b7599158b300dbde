"""What a transient run (`@cairn.workflow(durable=False)`) refuses, and how one is known.

The rules RunControl (runtime/control.py) and the engine's verbs check before a run is
stored; runtime/transient.py, which executes transient runs on an engine of its own,
builds on them. Kept apart so that RunControl need not import the module that makes
engines.
"""

from __future__ import annotations

from typing import Any

from cairn.authoring.definitions import WorkflowDef
from cairn.authoring.registry import Registry
from cairn.errors import TransientWorkflow

# What a transient run refuses, as the end of TransientWorkflow's message.
NOT_FOR_WORKERS = (
    "it cannot be queued for workers (by Client.start, POST /api/v1/runs or an engine "
    "with workers=0); start it with engine.start() in the process that runs it, or call it"
)


def definition(registry: Registry, workflow: Any) -> WorkflowDef[Any, Any] | None:
    """The transient workflow `workflow` (a definition or a registered name), else None."""
    if isinstance(workflow, WorkflowDef):
        return None if workflow.durable else workflow
    found = registry.workflows.get(workflow) if isinstance(workflow, str) else None
    return found if found is not None and not found.durable else None


def refuse_queue(defn: WorkflowDef[Any, Any], queue: Any) -> None:
    """TransientWorkflow for a start of a transient workflow on a queue."""
    name = getattr(queue, "name", queue)
    raise TransientWorkflow(
        defn.name, f"it cannot run on a queue (queue={name!r}): queued runs wait in the database"
    )
