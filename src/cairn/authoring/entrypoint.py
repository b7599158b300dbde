"""Cloudflare's Python Workflows, as written there: `class Flow(cairn.WorkflowEntrypoint)`.

A subclass is registered as a workflow (under its class name, or its `name` attribute)
whose one argument is the event payload. Each execution makes an instance and calls
`await instance.run(event, step)`; `step` turns `do`, `sleep`, `sleep_until` and
`wait_for_event` (and the JavaScript names `sleepUntil`, `waitForEvent`) into cairn's own
steps, sleeps and waits, so keys, replay and retries are the ones every workflow has.

Step names are cache keys, as on Cloudflare: the workflow is declared with
`names_are_cache_keys`, so a step whose name its history lacks (a name made from the
time, say) runs and is recorded instead of failing the run with NonDeterminismError;
`cairn check --db` lists such runs.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from cairn.authoring import context, primitives
from cairn.authoring import options as seed_options
from cairn.authoring import registry as registries
from cairn.authoring.definitions import WorkflowDef
from cairn.authoring.step_functions import StepFunction
from cairn.authoring.workflow import make_workflow
from cairn.errors import InvalidArguments, InvalidValue
from cairn.names import check_name

__all__ = ["WorkflowEntrypoint", "WorkflowEvent", "WorkflowStep"]

# Cloudflare's default wait for an event.
EVENT_TIMEOUT = "24 hours"


@dataclass(frozen=True, slots=True)
class WorkflowEvent:
    """What `run(self, event, step)` gets: the payload the run was started with.

    `instance_id` is the run id and `timestamp` when the run started. `event["payload"]`
    (and `["timestamp"]`, `["instanceId"]`) reads the same, as Cloudflare's dict does.
    """

    payload: Any
    timestamp: datetime
    instance_id: str

    def __getitem__(self, key: str) -> Any:
        """`event["payload"]`, `event["timestamp"]`, `event["instanceId"]`."""
        fields = {
            "payload": self.payload,
            "timestamp": self.timestamp,
            "instanceId": self.instance_id,
            "instance_id": self.instance_id,
        }
        try:
            return fields[key]
        except KeyError:
            raise KeyError(f"{key!r} (the event has payload, timestamp, instanceId)") from None


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """What `step.wait_for_event` returns: the event's type, payload and timestamp.

    `timestamp` is when the run took the event (its history entry's finish time, the same
    in every replay); cairn does not keep when it was sent.
    """

    type: str
    payload: Any
    timestamp: datetime | None = None

    def __getitem__(self, key: str) -> Any:
        """`event["payload"]`, `event["type"]`, `event["timestamp"]`."""
        if key in ("payload", "type", "timestamp"):
            return getattr(self, key)
        raise KeyError(f"{key!r} (a received event has type, payload and timestamp)")


class _NoBindings:
    """`self.env` of an entrypoint: cairn has no Cloudflare bindings."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"self.env.{name}: cairn has no Cloudflare bindings; read settings from your "
            "own configuration (environment variables, a settings module)"
        )

    def __bool__(self) -> bool:
        return False


class WorkflowEntrypoint:
    """Base class of Cloudflare-style workflows: define `async def run(self, event, step)`.

    A subclass is registered when it is defined, under its class name or its `name`
    class attribute; class keywords set the other workflow options:
    `class CatFlow(cairn.WorkflowEntrypoint, queue="cats", timeout="1d", registry=r)`.
    Start it with `engine.start(CatFlow, payload, run_id=...)`.
    """

    name: ClassVar[str | None] = None
    """The stored workflow name (default: the class name)."""

    __cairn_workflow__: ClassVar[WorkflowDef[..., Any]]
    """The workflow a subclass is registered as (what `engine.start(Subclass)` starts)."""

    def __init__(self, ctx: Any = None, env: Any = None) -> None:
        """Cloudflare passes (ctx, env); cairn has neither to give."""
        self.ctx = ctx
        self.env = env if env is not None else _NoBindings()

    def __init_subclass__(
        cls,
        *,
        registry: registries.Registry | None = None,
        queue: Any = None,
        on: str | None = None,
        timeout: Any = None,
        version: str | None = None,
        max_recoveries: int = 8,
        **kwargs: Any,
    ) -> None:
        """Register the subclass as a workflow (unless it defines no `run`)."""
        super().__init_subclass__(**kwargs)
        run = _run_method(cls)
        if run is None:
            return  # an intermediate base class: nothing to run
        if not inspect.iscoroutinefunction(run):
            raise InvalidArguments(
                f"{cls.__qualname__}.run must be `async def run(self, event, step)` "
                "(cairn runs Cloudflare-style workflows as async code)"
            )
        name = cls.__dict__.get("name") or cls.__name__
        if not isinstance(name, str):
            raise InvalidArguments(f"{cls.__qualname__}.name must be a string, got {name!r}")

        async def run_entrypoint(payload: Any = None) -> Any:
            return await _execute(cls, payload)

        run_entrypoint.__module__ = cls.__module__
        run_entrypoint.__qualname__ = f"{cls.__qualname__}.run"
        run_entrypoint.__name__ = cls.__name__
        cls.__cairn_workflow__ = make_workflow(
            run_entrypoint,
            name=name,
            queue=queue,
            on=on,
            timeout=timeout,
            version=version,
            max_recoveries=max_recoveries,
            # Cloudflare's rule: a step's name is its cache key. A step the history does
            # not have (a name made from the time, say) runs anew instead of diverging.
            names_are_cache_keys=True,
            reg=registry,
        )

    async def run(self, event: WorkflowEvent, step: WorkflowStep) -> Any:
        """The workflow's code (override it)."""
        raise NotImplementedError


def _run_method(cls: type) -> Callable[..., Any] | None:
    run = cls.run  # type: ignore[attr-defined]
    if run is not WorkflowEntrypoint.run:
        return run  # type: ignore[no-any-return]
    # Older Cloudflare examples name it on_run.
    on_run = getattr(cls, "on_run", None)
    return on_run if callable(on_run) else None


async def _execute(cls: type[WorkflowEntrypoint], payload: Any) -> Any:
    """One execution of `cls`'s run: a fresh instance, the event, and a fresh `step`."""
    instance = _instantiate(cls)
    info = primitives.current_run()
    event = WorkflowEvent(payload, info.started_at, info.run_id)
    run = _run_method(cls)
    assert run is not None
    return await run(instance, event, WorkflowStep())


def _instantiate(cls: type[WorkflowEntrypoint]) -> WorkflowEntrypoint:
    signature = inspect.signature(cls)
    for args in ((), (None, None)):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return cls(*args)
    raise InvalidArguments(
        f"cannot make a {cls.__qualname__}: its __init__ must take no arguments, or "
        "Cloudflare's (ctx, env)"
    )


class WorkflowStep:
    """The `step` of `run(self, event, step)`: Cloudflare's step API over cairn's own."""

    def __init__(self) -> None:
        # Step functions declared so far (by function name) and the results they gave:
        # a parameter named after one receives its result.
        self._functions: dict[str, StepFunction] = {}
        self._results: dict[StepFunction, Any] = {}
        # Dependencies being resolved now: a second step needing one waits for the same run.
        self._resolving: dict[StepFunction, asyncio.Future[Any]] = {}

    def do(
        self,
        *args: Any,
        concurrent: bool = False,
        config: dict[str, Any] | None = None,
        depends: list[Any] | None = None,
    ) -> Any:
        """Declare a step (`@step.do(name, config=...)`) or run one (`await step.do(name, fn)`).

        Forms: `@step.do()`, `@step.do`, `@step.do("name", config={...})` decorate an async
        or sync function, which then runs as a durable step each time it is awaited;
        `step.do("name", fn)` and `step.do("name", {config}, fn)` run `fn` at once. A
        parameter of the function named after an earlier step function receives that
        step's result (running it first if it has not run); a parameter named `ctx`
        receives `cairn.current_step()`.

        Args:
            *args: The name and, in the call form, the config and function.
            concurrent: Resolve missing dependencies side by side.
            config: `{"retries": {"limit", "delay", "backoff"}, "timeout"}`.
            depends: Step functions whose results are passed first, in order.

        Raises:
            ValueError: A config key or value cairn does not take, named.
            TypeError: Arguments that fit none of the forms.
        """
        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], str):
            return self._declare(None, args[0], config, concurrent, depends)
        name: str | None = None
        if args:
            name = args[0]
            if not isinstance(name, str):
                raise InvalidArguments(f"step.do: the name must be a string, got {name!r}")
            check_name(name, "step name")
        rest = args[1:]
        if len(rest) == 2 and isinstance(rest[0], dict) and config is None:
            config, rest = rest[0], rest[1:]  # JavaScript's order: name, config, callback
        if not rest:
            if len(args) > 1:
                raise InvalidArguments("step.do(name, config, fn): the function is missing")
            # The config is checked here, where it is written, not when the function comes.
            seed_options.from_cloudflare(f"step {name!r}" if name else "step.do", config)
            return lambda fn: self._declare(name, fn, config, concurrent, depends)
        if len(rest) != 1 or not callable(rest[0]):
            raise InvalidArguments(
                "step.do takes a name and a function (step.do(name, fn)), or decorates one "
                f"(@step.do(name, config=...)); got {args!r}"
            )
        return self._declare(name, rest[0], config, concurrent, depends)()

    def _declare(
        self,
        name: str | None,
        fn: Callable[..., Any],
        config: dict[str, Any] | None,
        concurrent: bool,
        depends: list[Any] | None,
    ) -> StepFunction:
        if not callable(fn):
            raise InvalidArguments(f"step.do decorates a function, got {fn!r}")
        step_name = name if name is not None else getattr(fn, "__name__", "")
        check_name(step_name, "step name")
        retry, timeout = seed_options.from_cloudflare(f"step {step_name!r}", config)
        for dep in depends or ():
            if not isinstance(dep, StepFunction):
                raise InvalidArguments(
                    f"step {step_name!r}: depends= lists step functions (declared with "
                    f"@step.do), got {dep!r}"
                )
        made = StepFunction(self, step_name, fn, retry, timeout, concurrent, list(depends or ()))
        self._functions[made.__name__] = made
        return made

    def sleep(self, name: str, duration: Any) -> Any:
        """Sleep durably for `duration` ("3 hours", "10 seconds", seconds, a timedelta)."""
        return primitives.sleep(name, duration)

    def sleep_until(self, name: str, timestamp: Any) -> Any:
        """Sleep durably until `timestamp`: a datetime, or seconds since the epoch."""
        if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
            timestamp = datetime.fromtimestamp(timestamp, UTC)
        return primitives.sleep_until(name, timestamp)

    def sleepUntil(self, name: str, timestamp: Any) -> Any:
        """`step.sleepUntil(name, when)`, Cloudflare's JavaScript name of `sleep_until`."""
        return self.sleep_until(name, timestamp)

    async def waitForEvent(self, name: str, options: dict[str, Any]) -> ReceivedEvent:
        """`await step.waitForEvent(name, {"type": ..., "timeout": ...})`, as in JavaScript.

        The same wait as `wait_for_event(name, type, timeout=...)`; `timeout` defaults to
        "24 hours". Raises ValueError naming a missing `type` or an unknown key.
        """
        if not isinstance(options, dict):
            raise InvalidArguments(
                f"step.waitForEvent({name!r}, options): options must be a dict like "
                f'{{"type": "approval", "timeout": "1 hour"}}, got {options!r}'
            )
        unknown = sorted(set(options) - {"type", "timeout"})
        if unknown:
            raise InvalidValue(
                f"step.waitForEvent({name!r}): unknown option {unknown[0]!r} (known: type, timeout)"
            )
        if not isinstance(options.get("type"), str):
            raise InvalidValue(f'step.waitForEvent({name!r}): options need "type", the event type')
        timeout = options.get("timeout", EVENT_TIMEOUT)
        return await self.wait_for_event(name, options["type"], timeout=timeout)

    async def wait_for_event(
        self, name: str, event_type: str, /, *, timeout: Any = EVENT_TIMEOUT
    ) -> ReceivedEvent:
        """Wait for an event of `event_type` (`engine.send_event(run_id, event_type, ...)`).

        `name` labels the wait in Cloudflare; cairn keys waits by the event type. Raises
        `cairn.EventTimeout` after `timeout` (default "24 hours", as Cloudflare's).
        """
        check_name(name, "step name")
        payload = await primitives.wait_for_event(event_type, timeout=timeout)
        taken = context.current("step.wait_for_event").received_at
        when = None if taken is None else datetime.fromtimestamp(taken, UTC)
        return ReceivedEvent(event_type, payload, when)
