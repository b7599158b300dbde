"""The registry of workflow definitions: a plain object the engine takes explicitly."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from cairn import serialization
from cairn.errors import ConfigError

if TYPE_CHECKING:
    from cairn.authoring.definitions import StepDef, WorkflowDef
    from cairn.authoring.schedule_ticks import ScheduleDef


class DeclaredQueue(Protocol):
    """A queue declared in code, as the registry keeps it.

    `cairn.Queue` (authoring/queues.py) registers itself when made, so it imports this
    module and this one names it only by the limits it holds.
    """

    @property
    def name(self) -> str:
        """The queue's name."""

    @property
    def concurrency(self) -> int | None:
        """Runs of the queue executing at once across all workers (None: any)."""

    @property
    def per_worker(self) -> int | None:
        """Runs of the queue executing at once on one worker (None: any)."""

    @property
    def rate(self) -> str | None:
        """At most COUNT starts in any DURATION, as "COUNT/DURATION" (None: no limit)."""

    @property
    def rate_limit(self) -> tuple[int, float] | None:
        """`rate` read: COUNT and DURATION in seconds."""

    @property
    def partition_concurrency(self) -> int | None:
        """Runs executing at once per `partition=` value (None: any)."""


def describe(fn: Callable[..., Any]) -> str:
    """`module.qualname (file:line)` of a function, for error messages.

    A bound method (a class-based step's `execute`) is named after its object's class,
    where it is defined: two step classes may share one inherited `execute`.
    """
    module, qualname = _origin(fn)
    code = type(fn.__self__) if inspect.ismethod(fn) else fn
    try:
        source = inspect.getsourcefile(code)
        line = inspect.getsourcelines(code)[1]
    except (OSError, TypeError):
        return f"{module}.{qualname}"
    return f"{module}.{qualname} ({source}:{line})"


def _origin(fn: Callable[..., Any]) -> tuple[str, str]:
    """Module and qualified name of a definition; a bound method's, by its object's class."""
    if inspect.ismethod(fn):
        kind = type(fn.__self__)
        return kind.__module__, f"{kind.__qualname__}.{fn.__name__}"
    return fn.__module__, fn.__qualname__


def _same_definition(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    # A module imported twice (or reloaded) redefines the same function: not a conflict.
    return _origin(a) == _origin(b)


class Registry:
    """Workflows and steps by name. Duplicate names raise ValueError naming both."""

    def __init__(self) -> None:
        self.workflows: dict[str, WorkflowDef[Any, Any]] = {}
        self.steps: dict[str, StepDef[Any, Any]] = {}
        self.queues: dict[str, DeclaredQueue] = {}
        self.schedules: dict[str, ScheduleDef] = {}

    def add_workflow(self, workflow: WorkflowDef[Any, Any]) -> None:
        """Register `workflow` under its name."""
        existing = self.workflows.get(workflow.name)
        if existing is not None and not _same_definition(existing.fn, workflow.fn):
            raise ValueError(
                f"workflow name {workflow.name!r} is already registered by "
                f"{describe(existing.fn)}; cannot register {describe(workflow.fn)}"
            )
        self.workflows[workflow.name] = workflow
        serialization.allow_imports(getattr(workflow.fn, "__module__", None) or "")

    def add_step(self, step: StepDef[Any, Any]) -> None:
        """Register `step` under its name."""
        existing = self.steps.get(step.name)
        if existing is not None and not _same_definition(existing.fn, step.fn):
            raise ValueError(
                f"step name {step.name!r} is already registered by "
                f"{describe(existing.fn)}; cannot register {describe(step.fn)}: give one "
                "of them a name of its own (name=...)"
            )
        self.steps[step.name] = step
        serialization.allow_imports(getattr(step.fn, "__module__", None) or "")

    def add_queue(self, queue: DeclaredQueue) -> None:
        """Register a queue declaration; a second, different one under the name fails."""
        existing = self.queues.get(queue.name)
        if existing is not None and existing != queue:
            raise ValueError(
                f"queue {queue.name!r} is already declared as {existing!r}; cannot redeclare "
                f"it as {queue!r}"
            )
        self.queues[queue.name] = queue

    def add_schedule(self, schedule: ScheduleDef) -> None:
        """Register a schedule declaration; a second, different one under its id fails."""
        existing = self.schedules.get(schedule.id)
        if existing is not None and existing != schedule:
            raise ValueError(
                f"schedule id {schedule.id!r} is already declared ({existing.workflow}, "
                f"{existing.describe()}); pass id= to tell the schedules apart"
            )
        self.schedules[schedule.id] = schedule

    def workflow(self, name: str) -> WorkflowDef[Any, Any]:
        """The workflow called `name`; ConfigError lists what is known."""
        try:
            return self.workflows[name]
        except KeyError:
            known = ", ".join(sorted(self.workflows)) or "none"
            raise ConfigError(
                f"unknown workflow {name!r} (registered: {known}); "
                "import the module that defines it (-m MODULE or Engine(modules=...))"
            ) from None


default_registry = Registry()
