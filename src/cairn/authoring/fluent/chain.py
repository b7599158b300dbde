"""`cairn.Workflow(name).then(...)`: a workflow declared as a chain of stages.

A chain is an ordinary workflow (a WorkflowDef) whose function runs its stages in order,
each receiving the previous stage's result. Nothing here executes anything itself: the
stages go through the same steps, waits, keys and replay as any other workflow.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from typing import Any, Self

from cairn.authoring import registry as registries
from cairn.authoring.definitions import WorkflowDef
from cairn.authoring.fluent import stages as kinds
from cairn.authoring.fluent.building import Arm, StageList
from cairn.authoring.retry import Retry
from cairn.authoring.workflow import workflow_fields
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["Workflow"]


class Workflow(WorkflowDef[..., Any], StageList):
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
            raise InvalidArguments(f"cairn.Workflow needs a name string, got {name!r}")
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
    ) -> Self:
        """Append a stage (see `StageList.then`); the first one's signature is the chain's.

        A start's arguments go to the first stage, so they are checked against its
        parameters, and converted to their types, as a `@cairn.workflow`'s are.
        """
        super().then(stage, name=name, retries=retries, timeout=timeout, options=options, kind=kind)
        first = self._stages[0]
        if len(self._stages) == 1 and isinstance(first, kinds.Call):
            target = getattr(first.target, "fn", None)
            try:
                signature = inspect.signature(target, eval_str=True)  # type: ignore[arg-type]
            except Exception:  # unreadable, or an annotation its module cannot resolve
                return self
            self.fn.__signature__ = signature  # type: ignore[attr-defined]
        return self

    @staticmethod
    def arm() -> Arm:
        """A branch arm to build with `then`, `screen`, `wait_for_event`, `sleep`, `emit`...

        `.branch(pred, then=cairn.Workflow.arm().screen(...).then(send))`: an arm holds
        every kind of stage a chain does, with the same arguments and meaning.
        """
        return Arm()

    def _where(self) -> str:
        return f"workflow {self.name!r}"

    @property
    def stages(self) -> Sequence[Any]:
        """The stages in order: a step, a workflow, or a tuple naming the kind first.

        `("branch", ...)`, `("screen", name, form)`, `("workflow", fn)`...
        """
        return [stage.describe() for stage in self._stages]

    async def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not self._stages:
            raise InvalidValue(f"workflow {self.name!r} has no stages: add them with .then(...)")
        value = await kinds.run_in_order(self._stages, args, kwargs, kinds.SAME)
        return None if value is kinds.SAME else value
