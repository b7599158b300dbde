"""ControlView: RunControl as the modules beside it see it (tasks, queues, hooks, ...).

RunControl (runtime/control.py) is the one implementation. It makes a TaskControl, a
QueueControl and a ScheduleControl with itself, and hands itself to hooks, triggers and
the catalog; they type it as this Protocol, so none of them imports runtime/control.py
back. What they use: the store and the clock, the serializer for what they store, the
registry of workflows this process imports, handles on runs (RunOperations), and a nudge
for this process's worker.
"""

from __future__ import annotations

from typing import Protocol

from cairn.authoring.registry import Registry
from cairn.clock import Clock
from cairn.runtime.handle import RunOperations
from cairn.runtime.local_executor import LocalExecutor
from cairn.runtime.workflow_names import WorkflowNames
from cairn.serialization import Serializer
from cairn.store.protocol import Store


class ControlView(RunOperations, Protocol):
    """The store, clock, serializer and registry of a RunControl, and its run verbs."""

    store: Store
    clock: Clock
    serializer: Serializer
    registry: Registry
    names: WorkflowNames  # the workflow names workers seen lately know

    @property
    def local(self) -> LocalExecutor | None:
        """This process's worker, if it executes runs."""
        ...

    def wake_local(self) -> None:
        """Let this process's worker pick up a run that just became due."""
        ...
