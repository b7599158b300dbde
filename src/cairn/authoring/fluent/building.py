"""The methods that append stages, shared by a chain and a branch arm.

`cairn.Workflow("letters").then(...).screen(...)` and `cairn.Workflow.arm().screen(...)`
take the same stages with the same arguments: an arm is a chain's stretch that a branch
runs, so whatever a chain can do next, an arm can do too (a screen, a wait, a
workflow-kind stage, another branch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from cairn.authoring import context
from cairn.authoring.fluent import stages as kinds
from cairn.authoring.retry import Retry
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["Arm", "StageList"]


class StageList:
    """Stages in order, and the methods that append them (each returns `self`)."""

    _stages: list[kinds.Stage]

    def _where(self) -> str:
        """How errors name what the stages are added to: "workflow 'letters'"."""
        raise NotImplementedError

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
        """Append a stage; returns this workflow (or arm), to chain further calls.

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
        where = self._where()
        self._stages.append(kinds.stage_of(where, stage, name, retries, timeout, options, kind))
        return self

    def screen(
        self,
        name: str,
        *,
        title: str | Callable[[Any], str],
        form: Any = None,
        assignee: str | None = None,
        timeout: Any = None,
    ) -> Self:
        """Append a screen: a human task showing the previous result; its answer goes on.

        Args:
            name: The task's name (its history key is `~task:NAME#n`).
            title: What the person sees, or a function of the previous result giving it.
            form: A JSON Schema dict or a pydantic model the answer must fit.
            assignee: Who should answer (free text).
            timeout: How long the task stays open; `cairn.EventTimeout` after that.
        """
        self._stages.append(kinds.Screen(self._where(), name, title, form, assignee, timeout))
        return self

    def wait_for_event(
        self, name: str, *, timeout: Any = None, default: Any = context.MISSING
    ) -> Self:
        """Append a wait for the next event `name` sent to the run; its payload goes on.

        Args:
            name: The event name (`engine.send_event(run_id, name, payload)`).
            timeout: How long to wait; None waits forever.
            default: What goes on after the timeout, instead of `cairn.EventTimeout`.
        """
        self._stages.append(kinds.WaitForEvent(name, timeout, default))
        return self

    def sleep(self, duration: Any, *, name: str | None = None) -> Self:
        """Append a durable sleep ("1 day", seconds, a timedelta); the result passes on.

        A `name` labels it in the history (`~sleep:NAME#n`).
        """
        self._stages.append(kinds.Sleep(duration, name))
        return self

    def emit(
        self, event_type: str, *, key: str | Callable[[Any], str | None] | None = None
    ) -> Self:
        """Append an emit: the subscribers of `event_type` start; the result passes on.

        The workflows subscribed to `event_type` start once, with the previous result
        as their argument (see `cairn.emit`).

        Args:
            event_type: The event type their `on=` names.
            key: Remembered per event type, so emitting it again starts nothing new: a
                string, or a function of the previous result giving one.
        """
        self._stages.append(kinds.Emit(self._where(), event_type, key))
        return self

    def branch(
        self,
        predicate: Callable[[Any], Any],
        *,
        then: Any = None,
        otherwise: Any = None,
    ) -> Self:
        """Route on the previous result: `then` if `predicate(result)` is true, else `otherwise`.

        Each arm is a stage, a `cairn.Workflow.arm()` built with these same methods (for
        a screen, a wait, a workflow-kind stage... on one path only), a list of either
        run in order, or None (the result passes on unchanged). The predicate runs in
        workflow code on a recorded result, so it must depend on nothing else (no clock,
        no I/O): a replay then takes the same arm.
        """
        if not callable(predicate):
            raise InvalidArguments(
                f"{self._where()}: branch needs a predicate function, got {predicate!r}"
            )
        self._stages.append(
            kinds.Branch(predicate, self._arm(then, "then"), self._arm(otherwise, "otherwise"))
        )
        return self

    def _arm(self, arm: Any, which: str) -> list[kinds.Stage]:
        if arm is None:
            return []
        items = arm if isinstance(arm, list | tuple) else [arm]
        stages: list[kinds.Stage] = []
        for item in items:
            if isinstance(item, Arm):
                stages.extend(item._stages)  # as they are now: adding to it later changes nothing
            else:
                stages.append(kinds.stage_of(self._where(), item, None, None, None, None))
        if not stages:
            empty = "an empty arm" if items else "an empty list"
            raise InvalidValue(f"{self._where()}: branch {which}= is {empty} (None passes on)")
        return stages


class Arm(StageList):
    """A branch arm built like a chain: `cairn.Workflow.arm().screen(...).then(...)`.

    Pass it as `then=` or `otherwise=` of `.branch(...)`: its stages run in order on that
    path, the first receiving the result the predicate saw. It is not a workflow (it is
    neither registered nor started by itself); the branch takes its stages when called.
    """

    def __init__(self) -> None:
        """An arm with no stages yet."""
        self._stages = []

    def _where(self) -> str:
        return "branch arm"

    @property
    def stages(self) -> list[Any]:
        """Its stages as `Workflow.stages` lists them."""
        return [stage.describe() for stage in self._stages]

    def __repr__(self) -> str:
        """`Arm(['screen', ...])`."""
        return f"Arm({self.stages!r})"
