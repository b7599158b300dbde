"""`cairn.Step`: a named durable step, declared by a call or by a class with `execute`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from cairn.authoring import class_steps
from cairn.authoring import options as seed_options
from cairn.authoring import registry as registries
from cairn.authoring.definitions import StepDef
from cairn.authoring.retry import Retry, coerce
from cairn.authoring.step import _timeout_seconds, check_isolation, check_queue
from cairn.errors import InvalidArguments
from cairn.names import check_name

__all__ = ["Step"]


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
                raise InvalidArguments(
                    "cairn.Step needs a function: cairn.Step(name, fn), or subclass it "
                    "with `async def execute(self, ...)`"
                )
            fn = self.execute
        if not callable(fn):
            raise InvalidArguments(f"cairn.Step needs a function, got {fn!r}")
        if name is None:
            name = _class_name(kind) if kind is not Step else fn.__name__
        if not isinstance(name, str):
            raise InvalidArguments(f"cairn.Step name must be a string, got {name!r}")
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
        raise InvalidArguments(f"cairn.Step name must be a string, got {name!r}")
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
        raise InvalidArguments(f"keep_input of {where} must be True or False, got {keep_input!r}")
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
