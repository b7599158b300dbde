"""`@cairn.workflow` and `cairn.chain`: a WorkflowDef, checked and registered."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from cairn.authoring import registry
from cairn.authoring.definitions import StepDef, WorkflowDef
from cairn.authoring.step import _timeout_seconds
from cairn.errors import InvalidArguments, InvalidValue, TransientWorkflow
from cairn.names import check_name, check_queue_name

P = ParamSpec("P")
R = TypeVar("R")


def make_workflow(
    fn: Callable[P, R],
    *,
    name: str | None = None,
    queue: Any = None,
    on: str | None = None,
    timeout: Any = None,
    version: str | None = None,
    max_recoveries: int = 8,
    durable: bool = True,
    names_are_cache_keys: bool = False,
    reg: registry.Registry | None = None,
) -> WorkflowDef[P, R]:
    """Build and register a WorkflowDef for `fn`."""
    fields = workflow_fields(
        fn,
        name=name,
        queue=queue,
        on=on,
        timeout=timeout,
        version=version,
        max_recoveries=max_recoveries,
        durable=durable,
    )
    defn: WorkflowDef[P, R] = WorkflowDef(**fields, names_are_cache_keys=names_are_cache_keys)
    functools.update_wrapper(defn, fn)
    (reg or registry.default_registry).add_workflow(defn)
    return defn


def workflow_fields(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    queue: Any = None,
    on: str | None = None,
    timeout: Any = None,
    version: str | None = None,
    max_recoveries: int = 8,
    durable: bool = True,
) -> dict[str, Any]:
    """The checked fields of a WorkflowDef for `fn` (shared by every way to declare one)."""
    if not callable(fn):
        raise InvalidArguments(f"@cairn.workflow needs a function, got {fn!r}")
    wf_name = check_name(name or f"{fn.__module__}.{fn.__qualname__}", "workflow name")
    if not isinstance(max_recoveries, int) or max_recoveries < 0:
        raise InvalidValue(f"invalid max_recoveries for workflow {wf_name!r}: {max_recoveries!r}")
    queue_name = getattr(queue, "name", queue)
    if queue_name is not None:
        check_queue_name(queue_name, f"queue of workflow {wf_name!r}")
    if not isinstance(durable, bool):
        raise InvalidArguments(
            f"durable of workflow {wf_name!r} must be True or False, got {durable!r}"
        )
    if not durable:
        _check_transient(wf_name, queue_name, on)
    return {
        "name": wf_name,
        "fn": fn,
        "queue": queue_name,
        "on": on,
        "timeout": _timeout_seconds(timeout, f"timeout of workflow {wf_name!r}"),
        "version": version,
        "max_recoveries": max_recoveries,
        "is_async": inspect.iscoroutinefunction(fn),
        "durable": durable,
    }


def _check_transient(name: str, queue: str | None, on: str | None) -> None:
    """TransientWorkflow for options that hand a transient workflow's runs to the database."""
    if queue is not None:
        raise TransientWorkflow(
            name, f"it cannot have a queue (queue={queue!r}): queued runs wait in the database"
        )
    if on is not None:
        raise TransientWorkflow(
            name, f"it cannot subscribe to events (on={on!r}): an emit starts runs in the database"
        )


@overload
def workflow(fn: Callable[P, R], /) -> WorkflowDef[P, R]: ...


@overload
def workflow(
    name: str | None = None,
    *,
    queue: Any = None,
    on: str | None = None,
    timeout: Any = None,
    version: str | None = None,
    max_recoveries: int = 8,
    durable: bool = True,
) -> Callable[[Callable[P, R]], WorkflowDef[P, R]]: ...


def workflow(
    name: Any = None,
    *,
    queue: Any = None,
    on: str | None = None,
    timeout: Any = None,
    version: str | None = None,
    max_recoveries: int = 8,
    durable: bool = True,
) -> Any:
    """Declare a workflow.

    Args:
        name: Stored name (default `module.qualname`; an explicit name is recommended).
        queue: Queue name or `cairn.Queue` its runs go to (default: none).
        on: Event type that starts it (see `cairn.emit`).
        timeout: Whole-run time limit; the run is cancelled when it expires.
        version: Free-form code version, recorded with each run.
        max_recoveries: Crash recoveries allowed before the run fails with PoisonRun (8).
        durable: False makes it transient: its runs execute in the process that starts
            them (`engine.start`, or a direct call outside a run) with their history in
            memory only; retries and sleeps work, nothing survives the process. It then
            takes no queue or `on`, and cannot be scheduled or queued for workers.

    Returns:
        A WorkflowDef that keeps the function's signature.

    Raises:
        TransientWorkflow: durable=False with a queue or `on`.
    """
    options: dict[str, Any] = dict(
        queue=queue,
        on=on,
        timeout=timeout,
        version=version,
        max_recoveries=max_recoveries,
        durable=durable,
    )
    if callable(name):
        return make_workflow(name, **options)
    if name is not None and not isinstance(name, str):
        raise InvalidArguments(f"@cairn.workflow name must be a string, got {name!r}")

    def decorate(fn: Callable[P, R]) -> WorkflowDef[P, R]:
        return make_workflow(fn, name=name, **options)

    return decorate


def chain(name: str, *steps: StepDef[Any, Any]) -> WorkflowDef[..., Any]:
    """A workflow that runs `steps` in order, each receiving the previous one's result.

    The first step receives the workflow's arguments.
    """
    if not steps:
        raise InvalidValue(f"cairn.chain({name!r}) needs at least one step")
    for item in steps:
        if not isinstance(item, StepDef):
            raise InvalidArguments(f"cairn.chain({name!r}): {item!r} is not a @cairn.step")

    async def run_chain(*args: Any, **kwargs: Any) -> Any:
        value = steps[0](*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        for item in steps[1:]:
            value = item(value)
            if inspect.isawaitable(value):
                value = await value
        return value

    run_chain.__qualname__ = run_chain.__name__ = name.replace(".", "_")
    return make_workflow(run_chain, name=name)
