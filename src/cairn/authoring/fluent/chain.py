"""`cairn.Workflow(name).then(...)`: a workflow declared as a chain of stages.

A chain is an ordinary workflow (a WorkflowDef) whose function runs its stages in order,
each receiving the previous stage's result. Nothing here executes anything itself: the
stages go through the same steps, waits, keys and replay as any other workflow.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from cairn.authoring import context
from cairn.authoring import registry as registries
from cairn.authoring.fluent import stages as kinds
from cairn.authoring.retry import Retry
from cairn.authoring.workflow import WorkflowDef, workflow_fields

__all__ = ["Workflow"]


class Workflow(WorkflowDef[..., Any]):
    """A workflow built as a chain of stages: `cairn.Workflow("letters").then(...)`.

    The first stage receives the workflow's arguments, each later one the previous
    stage's result, and the last stage's result is the run's result. A stage is a
    `cairn.Step`, a `@cairn.step`, a plain function (a step named after it), a workflow
    (started as a child run), a function run in workflow code (`kind="workflow"`), or
    one of the stages that suspend the run: `screen`, `wait_for_event`, `sleep` (and
    `emit`, which starts other runs). It is registered like `@cairn.workflow(name)`, so
    `engine.start(chain, ...)` and everything else work on it as on any workflow.
    """

    def __init__(
        self,
        name: str,
        *,
        queue: Any = None,
        on: str | None = None,
        timeout: Any = None,
        version: str | None = None,
        max_recoveries: int = 8,
        registry: registries.Registry | None = None,
    ) -> None:
        """Declare the chain (no stages yet: add them with `then`, `branch`, `screen`...).

        Args:
            name: Stored name of the workflow.
            queue: Queue name or `cairn.Queue` its runs go to.
            on: Event type that starts it.
            timeout: Whole-run time limit.
            version: Code version recorded with each run.
            max_recoveries: Crash recoveries allowed before PoisonRun.
            registry: Where to register it (default: cairn's own registry).
        """
        if not isinstance(name, str):
            raise TypeError(f"cairn.Workflow needs a name string, got {name!r}")
        self._stages: list[kinds.Stage] = []

        async def run_chain(*args: Any, **kwargs: Any) -> Any:
            return await self._run(args, kwargs)

        run_chain.__qualname__ = run_chain.__name__ = name.replace(".", "_")
        # The module that declares the chain: named in errors, allowed to import stored types.
        run_chain.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
        super().__init__(
            **workflow_fields(
                run_chain,
                name=name,
                queue=queue,
                on=on,
                timeout=timeout,
                version=version,
                max_recoveries=max_recoveries,
            )
        )
        (registry or registries.default_registry).add_workflow(self)

    def then(
        self,
        stage: Any,
        *,
        name: str | None = None,
        retries: Retry | int | None = None,
        timeout: Any = None,
        options: dict[str, Any] | None = None,
        kind: str = "step",
    ) -> Workflow:
        """Append a stage; returns this workflow, to chain further calls.

        Args:
            stage: A `cairn.Step` (or a Step subclass), a `@cairn.step`, a plain function
                (a step named after it), or a workflow (run as a child).
            name: The step's stored name instead of its own.
            retries: Its retry policy instead of its own.
            timeout: Its per-attempt time limit instead of its own.
            options: The same in DBOS words (see `@cairn.step`).
            kind: "step" (the default), or "workflow": `stage` is a function called in
                workflow code as `stage(ctx, previous)`, where it may wait, ask a person
                or emit, and return `ctx.screen(...)` or `ctx.wait_for_event(...)` to be
                called again with `ctx.resume_data` (see `StageContext`).
        """
        self._stages.append(kinds.stage_of(self.name, stage, name, retries, timeout, options, kind))
        return self

    def screen(
        self,
        name: str,
        *,
        title: str | Callable[[Any], str],
        form: Any = None,
        assignee: str | None = None,
        timeout: Any = None,
    ) -> Workflow:
        """Append a screen: a human task showing the previous result; its answer goes on.

        Args:
            name: The task's name (its history key is `~task:NAME#n`).
            title: What the person sees, or a function of the previous result giving it.
            form: A JSON Schema dict or a pydantic model the answer must fit.
            assignee: Who should answer (free text).
            timeout: How long the task stays open; `cairn.EventTimeout` after that.
        """
        self._stages.append(kinds.Screen(self.name, name, title, form, assignee, timeout))
        return self

    def wait_for_event(
        self, name: str, *, timeout: Any = None, default: Any = context.MISSING
    ) -> Workflow:
        """Append a wait for the next event `name` sent to the run; its payload goes on.

        Args:
            name: The event name (`engine.send_event(run_id, name, payload)`).
            timeout: How long to wait; None waits forever.
            default: What goes on after the timeout, instead of `cairn.EventTimeout`.
        """
        self._stages.append(kinds.WaitForEvent(name, timeout, default))
        return self

    def sleep(self, duration: Any, *, name: str | None = None) -> Workflow:
        """Append a durable sleep ("1 day", seconds, a timedelta); the result passes on.

        A `name` labels it in the history (`~sleep:NAME#n`).
        """
        self._stages.append(kinds.Sleep(duration, name))
        return self

    def emit(
        self, event_type: str, *, key: str | Callable[[Any], str | None] | None = None
    ) -> Workflow:
        """Append an emit: the subscribers of `event_type` start; the result passes on.

        The workflows subscribed to `event_type` start once, with the previous result
        as their argument (see `cairn.emit`).

        Args:
            event_type: The event type their `on=` names.
            key: Remembered per event type, so emitting it again starts nothing new: a
                string, or a function of the previous result giving one.
        """
        self._stages.append(kinds.Emit(self.name, event_type, key))
        return self

    def branch(
        self,
        predicate: Callable[[Any], Any],
        *,
        then: Any = None,
        otherwise: Any = None,
    ) -> Workflow:
        """Route on the previous result: `then` if `predicate(result)` is true, else `otherwise`.

        Each arm is a stage, a list of stages run in order, or None (the result passes on
        unchanged). The predicate runs in workflow code on a recorded result, so it must
        depend on nothing else (no clock, no I/O): a replay then takes the same arm.
        """
        if not callable(predicate):
            raise TypeError(
                f"workflow {self.name!r}: branch needs a predicate function, got {predicate!r}"
            )
        self._stages.append(
            kinds.Branch(predicate, self._arm(then, "then"), self._arm(otherwise, "otherwise"))
        )
        return self

    def _arm(self, arm: Any, which: str) -> list[kinds.Stage]:
        if arm is None:
            return []
        items = arm if isinstance(arm, list | tuple) else [arm]
        if not items:
            raise ValueError(f"workflow {self.name!r}: branch {which}= is an empty list")
        return [kinds.stage_of(self.name, item, None, None, None, None) for item in items]

    @property
    def stages(self) -> Sequence[Any]:
        """The stages in order: a step, a workflow, or a tuple naming the kind first.

        `("branch", ...)`, `("screen", name, form)`, `("workflow", fn)`...
        """
        return [stage.describe() for stage in self._stages]

    async def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not self._stages:
            raise ValueError(f"workflow {self.name!r} has no stages: add them with .then(...)")
        value = await kinds.run_in_order(self._stages, args, kwargs, kinds.SAME)
        return None if value is kinds.SAME else value
