"""Fluent chains: `cairn.Workflow(name).then(...).branch(...)` and `cairn.Step`.

A chain is an ordinary workflow (a WorkflowDef) whose function runs its stages in order,
each a durable step (or a child run) receiving the previous stage's result. Nothing here
executes anything itself: the stages go through the same steps, keys and replay as any
other workflow.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cairn.authoring import class_steps
from cairn.authoring import options as seed_options
from cairn.authoring import registry as registries
from cairn.authoring.retry import Retry, coerce
from cairn.authoring.step import StepDef, _timeout_seconds, check_isolation, check_queue
from cairn.authoring.workflow import WorkflowDef, workflow_fields
from cairn.names import check_name

__all__ = ["Step", "Workflow"]


class Step(StepDef[..., Any]):
    """A named durable step: `cairn.Step("fetch-order", fetch_order, options=...)`.

    Also the base of class-based steps, whose code is their `execute` method:

        class Charge(cairn.Step):
            max_retries = 5
            retry_delay = "exponential"

            async def execute(self, order):
                ...

    Such a class's name (or its `name` attribute) names the step, and each option of
    `@cairn.step` (`retries`, `max_retries`, `retry_delay`, `timeout`, `options`,
    `keep_input`, `queue`, `isolation`) may be set as a class attribute, checked when the class is
    defined (authoring/class_steps.py). Called inside a run, a Step is a durable step (key
    `NAME#n`); outside any run, a plain call.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the options the class declares now, as the decorator does its arguments."""
        super().__init_subclass__(**kwargs)
        class_steps.check_class(cls, Step)
        if cls.execute is Step.execute:
            # A base of other step classes: its options are checked with theirs.
            _options_of(cls, cls.__name__, {})
            return
        if cls.__init__ is Step.__init__ and "queue" in class_steps.declared(cls, Step):
            cls()  # registered, for the step queue's workers to find it by name
        else:
            _options_of(cls, _class_name(cls), {})

    def __init__(
        self,
        name: str | Callable[..., Any] | None = None,
        fn: Callable[..., Any] | None = None,
        *,
        retries: Retry | int | None = None,
        timeout: Any = None,
        options: dict[str, Any] | None = None,
        keep_input: bool | None = None,
        max_retries: int | None = None,
        retry_delay: Any = None,
        queue: str | None = None,
        isolation: str | None = None,
    ) -> None:
        """Declare the step.

        Args:
            name: Its stored name (default: a subclass's `name` attribute or class name,
                else the function's name). `Step(fn)` is `Step(None, fn)`.
            fn: What it runs (default: the subclass's `execute`).
            retries: A Retry, or an int of max attempts.
            timeout: Per-attempt time limit.
            options: The same in DBOS words (see `@cairn.step`).
            keep_input: False keeps its arguments out of the run's history.
            max_retries: pyworkflow's spelling: retries after the first attempt.
            retry_delay: pyworkflow's spelling: "fixed", "exponential" or a duration.
            queue: A step queue its attempts execute on (see `@cairn.step`); such a step
                is registered, for the queue's workers to find it by name.
            isolation: "process" runs each attempt in a child process (see
                `@cairn.step`); it needs a module-level function, so a class-based step
                (whose code is a method) cannot have it.

        Arguments given here win over a class's attributes of the same kind (any retry
        spelling given replaces the class's retry spellings).

        Raises:
            TypeError: No function and no `execute` method.
            ValueError: Two spellings of the retries, an unknown option, a bad value.
        """
        kind = type(self)
        if fn is None and callable(name) and not isinstance(name, str):
            name, fn = None, name
        if fn is None:
            if kind.execute is Step.execute:
                raise TypeError(
                    "cairn.Step needs a function: cairn.Step(name, fn), or subclass it "
                    "with `async def execute(self, ...)`"
                )
            fn = self.execute
        if not callable(fn):
            raise TypeError(f"cairn.Step needs a function, got {fn!r}")
        if name is None:
            name = _class_name(kind) if kind is not Step else fn.__name__
        if not isinstance(name, str):
            raise TypeError(f"cairn.Step name must be a string, got {name!r}")
        given = {
            "retries": retries,
            "timeout": timeout,
            "options": options,
            "keep_input": keep_input,
            "max_retries": max_retries,
            "retry_delay": retry_delay,
            "queue": queue,
            "isolation": isolation,
        }
        chosen = _options_of(kind, name, {k: v for k, v in given.items() if v is not None})
        is_async = asyncio.iscoroutinefunction(fn)
        chosen["isolation"] = check_isolation(
            chosen["isolation"], fn, f"step {chosen['name']!r}", is_async
        )
        super().__init__(fn=fn, is_async=is_async, **chosen)
        if self.queue is not None:
            registries.default_registry.add_step(self)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """The step's code, in a class-based step (override it)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        """`Step('fetch-order')`."""
        return f"{type(self).__name__}({self.name!r})"


# Options that spell a step's retries: one given to the constructor replaces all of the
# class's (two spellings at once are an error only when written in one place).
_RETRY_SPELLINGS = ("retries", "options", "max_retries", "retry_delay")


def _class_name(kind: type) -> Any:
    """A step class's own `name` attribute (not inherited), else its class name."""
    return kind.__dict__.get("name") or kind.__name__


def _options_of(kind: type, name: Any, given: dict[str, Any]) -> dict[str, Any]:
    """StepDef's fields from a Step's arguments over its class's attributes, all checked."""
    declared = class_steps.declared(kind, Step) if kind is not Step else {}
    declared.pop("name", None)
    if any(option in given for option in _RETRY_SPELLINGS):
        for option in _RETRY_SPELLINGS:
            declared.pop(option, None)
    merged = {**declared, **given}
    if not isinstance(name, str):
        raise TypeError(f"cairn.Step name must be a string, got {name!r}")
    check_name(name, "step name")
    where = f"step {name!r}"
    policy, limit = seed_options.resolve(
        where,
        retries=merged.get("retries"),
        timeout=merged.get("timeout"),
        options=merged.get("options"),
        max_retries=merged.get("max_retries"),
        retry_delay=merged.get("retry_delay"),
    )
    keep_input = merged.get("keep_input", True)
    if not isinstance(keep_input, bool):
        raise TypeError(f"keep_input of {where} must be True or False, got {keep_input!r}")
    return {
        "name": name,
        "retry": coerce(policy),
        "timeout": _timeout_seconds(limit, f"timeout of {where}"),
        "keep_input": keep_input,
        "queue": check_queue(merged.get("queue"), where),
        "isolation": check_isolation(merged.get("isolation"), _values_only, where, False),
    }


def _values_only() -> None:
    """Stands for a step's function where only an isolation's value is checked."""


_SAME = object()  # a branch arm that passes the previous result on unchanged


class Workflow(WorkflowDef[..., Any]):
    """A workflow built as a chain of stages: `cairn.Workflow("letters").then(...)`.

    The first stage receives the workflow's arguments, each later one the previous
    stage's result, and the last stage's result is the run's result. A stage is a
    `cairn.Step`, a `@cairn.step`, a plain function (a step named after it), or a
    workflow (started as a child run). It is registered like `@cairn.workflow(name)`,
    so `engine.start(chain, ...)` and everything else work on it as on any workflow.
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
        """Declare the chain (no stages yet: add them with `then` and `branch`).

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
        self._stages: list[_Stage] = []

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
    ) -> Workflow:
        """Append a stage; returns this workflow, to chain further calls.

        Args:
            stage: A `cairn.Step` (or a Step subclass), a `@cairn.step`, a plain function
                (a step named after it), or a workflow (run as a child).
            name: The step's stored name instead of its own.
            retries: Its retry policy instead of its own.
            timeout: Its per-attempt time limit instead of its own.
            options: The same in DBOS words (see `@cairn.step`).
        """
        self._stages.append(_Call(_stage(self.name, stage, name, retries, timeout, options)))
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
            _Branch(predicate, self._arm(then, "then"), self._arm(otherwise, "otherwise"))
        )
        return self

    def _arm(self, arm: Any, which: str) -> list[Callable[..., Any]]:
        if arm is None:
            return []
        items = arm if isinstance(arm, list | tuple) else [arm]
        if not items:
            raise ValueError(f"workflow {self.name!r}: branch {which}= is an empty list")
        return [_stage(self.name, item, None, None, None, None) for item in items]

    @property
    def stages(self) -> Sequence[Any]:
        """The stages in order (a step, a workflow, or a ("branch", ...) tuple)."""
        return [stage.describe() for stage in self._stages]

    async def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not self._stages:
            raise ValueError(f"workflow {self.name!r} has no stages: add them with .then(...)")
        value: Any = _SAME
        for stage in self._stages:
            if value is _SAME:
                value = await stage.run(args, kwargs, _SAME)
            else:
                value = await stage.run((value,), {}, value)
        return None if value is _SAME else value


class _Stage:
    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> Any:
        raise NotImplementedError


class _Call(_Stage):
    """One stage: a step or a child workflow, called with the previous result."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        return await _call(self.target, args, kwargs)

    def describe(self) -> Any:
        return self.target


class _Branch(_Stage):
    """Two arms, chosen by a predicate of the previous result."""

    def __init__(
        self,
        predicate: Callable[[Any], Any],
        then: list[Callable[..., Any]],
        otherwise: list[Callable[..., Any]],
    ) -> None:
        self.predicate = predicate
        self.then = then
        self.otherwise = otherwise

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], previous: Any) -> Any:
        decided = self.predicate(*args, **kwargs)
        if inspect.isawaitable(decided):
            decided = await decided
        value = previous
        for target in self.then if decided else self.otherwise:
            if value is _SAME:
                value = await _call(target, args, kwargs)
            else:
                value = await _call(target, (value,), {})
        return value

    def describe(self) -> Any:
        return ("branch", self.predicate, list(self.then), list(self.otherwise))


async def _call(target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    value = target(*args, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


def _stage(
    chain: str,
    stage: Any,
    name: str | None,
    retries: Retry | int | None,
    timeout: Any,
    options: dict[str, Any] | None,
) -> Callable[..., Any]:
    """What `then` runs for `stage`: a step (made from a plain function) or a workflow."""
    overrides = name is not None or retries is not None or timeout is not None or options
    if isinstance(stage, type) and issubclass(stage, Step):
        stage = stage()  # `.then(Charge)` for `.then(Charge())`
    if isinstance(stage, WorkflowDef):
        if overrides:
            raise TypeError(
                f"workflow {chain!r}: name/retries/timeout/options apply to steps; stage "
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
    raise TypeError(
        f"workflow {chain!r}: a stage must be a cairn.Step, a @cairn.step, a function or a "
        f"workflow, got {stage!r}"
    )
