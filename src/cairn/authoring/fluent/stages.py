"""The kinds of stage a chain runs, each with what it does with the previous result.

A step stage (and a child workflow) is durable work of its own. The other kinds run in
the chain's workflow code, because what they do is a durable primitive of the run: a
screen (a human task), a wait for an event, a sleep, an emit, or a workflow-kind stage,
the user's function called with a `StageContext`. A step cannot do these: it runs once
and is not replayed, so they are refused inside one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from cairn import durations
from cairn.authoring import forms, primitives
from cairn.authoring.definitions import StepDef, WorkflowDef
from cairn.authoring.fluent.stage_context import StageContext, Suspension
from cairn.authoring.fluent.steps import Step
from cairn.authoring.retry import Retry
from cairn.errors import InvalidArguments, InvalidValue
from cairn.names import check_name

SAME: Any = object()  # "no result yet": a stage then receives the run's own arguments

KINDS = ("step", "workflow")  # what `.then(..., kind=)` takes


class Stage:
    """One stage: `run` gets the arguments it is called with and the previous result."""

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """This stage's result, given its arguments and the previous result."""
        raise NotImplementedError

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        raise NotImplementedError


async def run_in_order(
    stages: Sequence[Stage], args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any
) -> Any:
    """Run `stages` one after another; each gets the previous result (the first, `args`)."""
    value = previous
    for stage in stages:
        if value is SAME:
            value = await stage.run(args, kwargs, SAME)
        else:
            value = await stage.run((value,), {}, value)
    return value


class Call(Stage):
    """A step or a child workflow, called with the previous result."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The step's (or the child run's) result."""
        return await _call(self.target, args, kwargs)

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return self.target


class Branch(Stage):
    """Two arms, chosen by a predicate of the previous result."""

    def __init__(
        self, predicate: Callable[[Any], Any], then: list[Stage], otherwise: list[Stage]
    ) -> None:
        self.predicate = predicate
        self.then = then
        self.otherwise = otherwise

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The result of the arm the predicate chooses."""
        decided = await _call(self.predicate, args, kwargs)
        return await run_in_order(self.then if decided else self.otherwise, args, kwargs, previous)

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        then = [s.describe() for s in self.then]
        otherwise = [s.describe() for s in self.otherwise]
        return ("branch", self.predicate, then, otherwise)


class InWorkflow(Stage):
    """A workflow-kind stage: `fn(ctx, value)` in workflow code, called again on resumption."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", repr(fn))

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The function's result, after any suspensions it returned are answered."""
        ctx = StageContext()
        while True:
            value = await _call(self.fn, (ctx, *args), kwargs)
            if not isinstance(value, Suspension):
                return value
            if value.awaited:
                raise InvalidArguments(
                    f"stage {self.name!r} returned a suspension it had awaited ({value.what}): "
                    "await it for its answer, or return it to be called again with "
                    "ctx.resume_data, not both"
                )
            # The answer is recorded by the primitive: a replay reaches the same call.
            ctx = StageContext(await value, resumed=True)

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return ("workflow", self.fn)


class Screen(Stage):
    """A human task showing the previous result; its submitted values go on."""

    def __init__(
        self,
        where: str,
        name: str,
        title: str | Callable[[Any], str],
        form: Any,
        assignee: str | None,
        timeout: Any,
    ) -> None:
        check_name(name, "human task name")
        if not isinstance(title, str) and not callable(title):
            raise InvalidArguments(
                f"{where}: screen {name!r} title must be a string or a function "
                f"of the previous result, got {title!r}"
            )
        forms.describe_form(form, what=f"form of screen {name!r}")
        _seconds(timeout, f"timeout of screen {name!r}")
        self.name, self.title, self.form = name, title, form
        self.assignee, self.timeout = assignee, timeout

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The values the person submitted."""
        data = _one(args, kwargs)
        title = self.title if isinstance(self.title, str) else await _call(self.title, (data,), {})
        return await primitives.human_task(
            self.name,
            title=title,
            data=data,
            form=self.form,
            assignee=self.assignee,
            timeout=self.timeout,
        )

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return ("screen", self.name, self.form)


class WaitForEvent(Stage):
    """The next event `name` sent to the run; its payload goes on."""

    def __init__(self, name: str, timeout: Any, default: Any) -> None:
        check_name(name, "event name")
        _seconds(timeout, f"timeout of wait_for_event({name!r})")
        self.name, self.timeout, self.default = name, timeout, default

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The event's payload (or the default, after the timeout)."""
        return await primitives.wait_for_event(
            self.name, timeout=self.timeout, default=self.default
        )

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return ("wait_for_event", self.name)


class Sleep(Stage):
    """A durable sleep; the previous result passes on unchanged."""

    def __init__(self, duration: Any, name: str | None) -> None:
        durations.parse(duration, what="sleep stage")
        if name is not None:
            check_name(name, "sleep name")
        self.duration, self.name = duration, name

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The previous result, after the sleep."""
        await primitives.sleep(self.duration, name=self.name)
        return previous

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return ("sleep", self.duration, self.name)


class Emit(Stage):
    """Starts the workflows subscribed to `event_type` with the previous result; it passes on."""

    def __init__(
        self, where: str, event_type: str, key: str | Callable[[Any], str | None] | None
    ) -> None:
        check_name(event_type, "event type")
        if key is not None and not isinstance(key, str) and not callable(key):
            raise InvalidArguments(
                f"{where}: emit {event_type!r} key must be a string or a function "
                f"of the previous result, got {key!r}"
            )
        self.event_type, self.key = event_type, key

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        """The previous result, once the subscribers are started."""
        payload = _one(args, kwargs)
        key = self.key if self.key is None or isinstance(self.key, str) else self.key(payload)
        await primitives.emit(self.event_type, payload, key=key)
        return previous

    def describe(self) -> Any:
        """What `Workflow.stages` lists for it."""
        return ("emit", self.event_type)


def stage_of(
    where: str,
    stage: Any,
    name: str | None,
    retries: Retry | int | None,
    timeout: Any,
    options: dict[str, Any] | None,
    kind: str = "step",
) -> Stage:
    """What `then` runs for `stage`.

    A step (made from a plain function), a workflow, or with `kind="workflow"` the
    function itself in workflow code.
    """
    if kind not in KINDS:
        raise InvalidValue(
            f"{where}: kind must be 'step' or 'workflow' (a function run in "
            f"workflow code), got {kind!r}"
        )
    overrides = name is not None or retries is not None or timeout is not None or options
    if kind == "workflow":
        if isinstance(stage, StepDef | WorkflowDef | type) or not callable(stage):
            raise InvalidArguments(
                f"{where}: kind='workflow' needs a plain function, got {stage!r}"
            )
        if overrides:
            raise InvalidArguments(
                f"{where}: name/retries/timeout/options apply to step stages; "
                f"stage {getattr(stage, '__name__', stage)!r} is kind='workflow' (workflow "
                "code, not a step)"
            )
        return InWorkflow(stage)
    return Call(_step_or_child(where, stage, name, retries, timeout, options))


def _step_or_child(
    where: str,
    stage: Any,
    name: str | None,
    retries: Retry | int | None,
    timeout: Any,
    options: dict[str, Any] | None,
) -> Callable[..., Any]:
    overrides = name is not None or retries is not None or timeout is not None or options
    if isinstance(stage, type) and issubclass(stage, Step):
        stage = stage()  # `.then(Charge)` for `.then(Charge())`
    if isinstance(stage, WorkflowDef):
        if overrides:
            raise InvalidArguments(
                f"{where}: name/retries/timeout/options apply to steps; stage "
                f"{stage.name!r} is a workflow, run as a child run with its own settings"
            )
        return stage
    if isinstance(stage, StepDef):
        if not overrides:
            return stage
        return Step(
            name or stage.name,
            stage.fn,
            retries=stage.retry if retries is None and not options else retries,
            timeout=stage.timeout if timeout is None and not options else timeout,
            options=options,
            keep_input=stage.keep_input,
        )
    if callable(stage):
        return Step(
            name or getattr(stage, "__name__", None),
            stage,
            retries=retries,
            timeout=timeout,
            options=options,
        )
    raise InvalidArguments(
        f"{where}: a stage must be a cairn.Step, a @cairn.step, a function or a "
        f"workflow, got {stage!r}"
    )


async def _call(target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    value = target(*args, **kwargs)
    if inspect.isawaitable(value) and not isinstance(value, Suspension):
        value = await value
    return value


def _one(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The value a screen shows or an emit sends: the previous result.

    As the first stage, the run's one argument (None with none; with several,
    `{"args": [...], "kwargs": {...}}`).
    """
    if len(args) == 1 and not kwargs:
        return args[0]
    if not args and not kwargs:
        return None
    return {"args": list(args), "kwargs": dict(kwargs)}


def _seconds(value: Any, what: str) -> None:
    if value is not None:
        durations.parse(value, what=what)
