"""`@cairn.step` (a StepDef, registered) and `cairn.run_step`: durable operations inside a run."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from cairn import durations
from cairn.authoring import context, registry, usage
from cairn.authoring import options as seed_options
from cairn.authoring.definitions import StepDef
from cairn.authoring.retry import Retry, coerce
from cairn.errors import InvalidArguments, InvalidValue
from cairn.names import check_name, check_queue_name

P = ParamSpec("P")
R = TypeVar("R")


def _timeout_seconds(timeout: Any, what: str) -> float | None:
    if timeout is None:
        return None
    seconds = durations.parse(timeout, what=what).total_seconds()
    if seconds <= 0:
        raise InvalidValue(f"invalid {what}: {timeout!r} (must be positive)")
    return seconds


def check_queue(queue: Any, where: str) -> str | None:
    """A step queue name as given, or None; InvalidName naming `where` if it is not one."""
    if queue is None:
        return None
    return check_queue_name(queue, f"queue of {where}")


def check_isolation(isolation: Any, fn: Callable[..., Any], where: str, is_async: bool) -> str:
    """`isolation` as given, refused with a ValueError naming `where` if it cannot apply."""
    if isolation is None:
        return "thread"
    if isolation not in ("thread", "process"):
        raise InvalidValue(f"isolation of {where} must be 'thread' or 'process', got {isolation!r}")
    if isolation == "process":
        if is_async:
            raise InvalidValue(
                f"{where}: isolation='process' runs a plain def function in a child process; "
                "an async def step cannot have it (its timeout cancels it already)"
            )
        qualname = getattr(fn, "__qualname__", "")
        if not hasattr(fn, "__code__") or "." in qualname or not qualname:
            raise InvalidValue(
                f"{where}: isolation='process' needs a module-level function (the child "
                f"process imports it by name), not {qualname or fn!r}"
            )
    return str(isolation)


def make_step(
    fn: Callable[P, R],
    name: str | None,
    retries: Retry | int | None,
    timeout: Any,
    reg: registry.Registry,
    *,
    keep_input: bool = True,
    queue: str | None = None,
    isolation: str | None = None,
) -> StepDef[P, R]:
    """Build and register a StepDef for `fn`."""
    if not callable(fn):
        raise InvalidArguments(f"@cairn.step needs a function, got {fn!r}")
    step_name = check_name(name or fn.__qualname__, "step name")
    if not isinstance(keep_input, bool):
        raise InvalidArguments(
            f"keep_input of @cairn.step {step_name!r} must be True or False, got {keep_input!r}"
        )
    # What executing a step goes by (asyncio's test also knows mocks' coroutine marker).
    is_async = asyncio.iscoroutinefunction(fn)
    defn = StepDef(
        name=step_name,
        fn=fn,
        retry=coerce(retries),
        timeout=_timeout_seconds(timeout, f"timeout of step {step_name!r}"),
        is_async=is_async,
        keep_input=keep_input,
        queue=check_queue(queue, f"step {step_name!r}"),
        isolation=check_isolation(isolation, fn, f"step {step_name!r}", is_async),
    )
    functools.update_wrapper(defn, fn)
    reg.add_step(defn)
    return defn


@overload
def step(fn: Callable[P, R], /) -> StepDef[P, R]: ...


@overload
def step(
    name: str | None = None,
    *,
    retries: Retry | int | None = None,
    timeout: Any = None,
    keep_input: bool = True,
    options: dict[str, Any] | None = None,
    max_retries: int | None = None,
    retry_delay: Any = None,
    queue: str | None = None,
    isolation: str | None = None,
) -> Callable[[Callable[P, R]], StepDef[P, R]]: ...


def step(
    name: Any = None,
    *,
    retries: Retry | int | None = None,
    timeout: Any = None,
    keep_input: bool = True,
    options: dict[str, Any] | None = None,
    max_retries: int | None = None,
    retry_delay: Any = None,
    queue: str | None = None,
    isolation: str | None = None,
    **unknown: Any,
) -> Any:
    """Declare a durable step.

    Args:
        name: Stored name of the step (default: the function's qualified name).
        retries: A Retry policy, or an int of max attempts (default `Retry()`).
        timeout: Per-attempt time limit as a duration (default: none).
        keep_input: False keeps the step's arguments out of the run's history (and so out
            of `cairn runs show` and the dashboard): for a step given secrets.
        options: The same in DBOS words: `retries_allowed`, `max_attempts`,
            `interval_seconds`, `backoff_rate`; or `num_retries` (after the first
            attempt); and `timeout`. An unknown key raises ValueError.
        max_retries: pyworkflow's spelling: retries after the first attempt.
        retry_delay: pyworkflow's spelling: "fixed", "exponential" or a duration.
        queue: A step queue: each attempt executes on a worker serving it (`cairn worker
            --queue NAME` or `--step-queue NAME`), while the run parks; the result comes
            back through the database. Default: the attempt executes where the run does.
        isolation: "process" runs each attempt of a plain `def` step in a child process
            (a fresh interpreter that imports the function by name: it must be
            module-level, its arguments and result picklable), killed at the timeout;
            "thread" (the default) in a worker thread, which a timeout cannot stop.
        **unknown: Refused with a TypeError that names cairn's spelling (DBOS's keywords
            go in `options`).

    Returns:
        A StepDef that keeps the function's signature. Inside a run a call is checkpointed;
        outside any run it is a plain call.

    Raises:
        ValueError: Two spellings of the retries (or of the timeout) at once, an unknown
            option, or a bad value.
    """
    if unknown:
        raise InvalidArguments(_unknown_arguments(unknown))
    if name is not None and not callable(name) and not isinstance(name, str):
        raise InvalidArguments(f"@cairn.step name must be a string, got {name!r}")

    def decorate(fn: Callable[P, R], step_name: str | None = name) -> StepDef[P, R]:
        where = f"step {step_name or getattr(fn, '__qualname__', fn)!r}"
        policy, limit = seed_options.resolve(
            where,
            retries=retries,
            timeout=timeout,
            options=options,
            max_retries=max_retries,
            retry_delay=retry_delay,
        )
        return make_step(
            fn,
            step_name,
            policy,
            limit,
            registry.default_registry,
            keep_input=keep_input,
            queue=queue,
            isolation=isolation,
        )

    if callable(name):
        return decorate(name, None)
    return decorate


OPTIONS: tuple[str, ...] = tuple(
    option
    for option, parameter in inspect.signature(step).parameters.items()
    if parameter.kind is not inspect.Parameter.VAR_KEYWORD
)
"""The options of a step, as `@cairn.step` takes them: its signature is their one table.

A class-based step (`class FetchUser(cairn.Step)`) sets the same names as class
attributes (see authoring/class_steps.py).
"""


def _unknown_arguments(unknown: dict[str, Any]) -> str:
    """The error for keywords @cairn.step does not take, naming cairn's spelling."""
    names = ", ".join(sorted(unknown))
    message = f"@cairn.step() got unexpected keyword argument(s): {names}"
    if set(unknown) <= set(seed_options.OPTION_KEYS):
        spelled = ", ".join(f"{k!r}: {v!r}" for k, v in sorted(unknown.items()))
        return f"{message}; DBOS's step options go in options=: @cairn.step(options={{{spelled}}})"
    return f"{message} (it takes {', '.join(OPTIONS[:-1])} and {OPTIONS[-1]})"


@usage.checked("cairn.run_step")
def run_step(
    name: str,
    fn: Callable[..., Any],
    *args: Any,
    retries: Retry | int | None = None,
    timeout: Any = None,
    options: dict[str, Any] | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> Any:
    """Run `fn(*args, **kwargs)` as a durable step called `name`.

    `retries`, `timeout`, `options` (DBOS words, as for `@cairn.step`) and `queue` are
    cairn's and never passed to `fn`. With `queue` the call executes on a worker serving
    that step queue: `fn` must then be a module-level function that worker can import.

    Returns:
        An awaitable of the result in an async workflow; the result itself in a sync
        workflow, where the call blocks like the other primitives.

    Raises:
        NotInRun: outside a run.
    """
    ctx = context.current("cairn.run_step()")
    if options is not None:
        retries, timeout = seed_options.resolve(
            f"step {name!r}", retries=retries, timeout=timeout, options=options
        )
    queue = check_queue(queue, f"step {name!r}")
    return ctx.call_inline(name, fn, args, kwargs, retries, timeout, queue)
