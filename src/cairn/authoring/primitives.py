"""In-run functions: each a few lines delegating to the active RunContext."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from datetime import date, datetime
from typing import Any, NoReturn, overload

from cairn import durations
from cairn.authoring import context, usage
from cairn.errors import InvalidArguments, InvalidValue, NotInRun
from cairn.models import RunInfo, StepInfo
from cairn.names import check_name


@usage.checked("cairn.current_run")
def current_run() -> RunInfo:
    """Facts about the run this code is part of (works inside steps too).

    Raises:
        NotInRun: outside a run.
    """
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.current_run()")
    assert ctx is not None
    return ctx.info()


# Idempotency keys are UUIDs in this namespace, named by the run id and the step key.
_IDEMPOTENCY = uuid.UUID("5d0c7a52-2f0e-4c8e-9a57-6b0f3c1e8d21")


def idempotency_key(run_id: str, key: str) -> str:
    """The idempotency key of step `key` in run `run_id` (see StepInfo)."""
    return str(uuid.uuid5(_IDEMPOTENCY, f"{run_id}\x00{key}"))


@usage.checked("cairn.current_step")
def current_step() -> StepInfo:
    """Facts about the step whose code runs now, with its stable idempotency key.

    Raises:
        NotInRun: outside a step's code (in workflow code, or outside a run).
    """
    frame = context.step_frame()
    ctx = context.in_run()
    if frame is None or ctx is None:
        raise NotInRun(
            "cairn.current_step() only works inside a step's code (a @cairn.step function "
            "running in a workflow); in workflow code use cairn.current_run()"
        )
    name, key, attempt = frame
    run_id = ctx.info().run_id
    return StepInfo(run_id, key, name, attempt, idempotency_key(run_id, key))


@overload
def sleep(duration: Any, /, *, name: str | None = None) -> Awaitable[None]: ...


@overload
def sleep(name: str, duration: Any, /) -> Awaitable[None]: ...


@usage.checked("cairn.sleep")
def sleep(*args: Any, name: str | None = None) -> Awaitable[None]:
    """Sleep durably: the wake time is recorded once, so a restart does not sleep again.

    `sleep(duration)`, `sleep(datetime)` (until then, like `sleep_until`), and
    `sleep(name, duration)` or `sleep(duration, name=...)`: a named sleep, whose history
    entry carries the name (its key is `~sleep:NAME#n`).

    Args:
        *args: The duration ("30s", "1h30m", "3 hours", seconds, a timedelta) or a
            datetime; or a name, then the duration.
        name: The sleep's name in the run's history.

    Raises:
        ValueError: A bad duration, named.
        TypeError: Neither of the forms above.
    """
    name, duration = _named("cairn.sleep", "duration", args, name)
    if isinstance(duration, datetime):
        return context.current("cairn.sleep()").sleep_until(duration, name)
    if isinstance(duration, date):
        raise InvalidValue(
            f"invalid duration for cairn.sleep: {duration!r} is a date; pass a datetime to "
            "sleep until then (cairn.sleep_until(datetime))"
        )
    seconds = durations.parse(duration, what="cairn.sleep").total_seconds()
    return context.current("cairn.sleep()").sleep(seconds, name)


@overload
def sleep_until(when: datetime, /, *, name: str | None = None) -> Awaitable[None]: ...


@overload
def sleep_until(name: str, when: datetime, /) -> Awaitable[None]: ...


@usage.checked("cairn.sleep_until")
def sleep_until(*args: Any, name: str | None = None) -> Awaitable[None]:
    """Sleep durably until a datetime (a naive one is taken as UTC).

    `sleep_until(when)`, or named: `sleep_until(name, when)` or `sleep_until(when, name=...)`.
    """
    name, when = _named("cairn.sleep_until", "datetime", args, name)
    if not isinstance(when, datetime):
        raise InvalidArguments(f"cairn.sleep_until needs a datetime, got {when!r}")
    return context.current("cairn.sleep_until()").sleep_until(when, name)


def _named(
    what: str, value: str, args: tuple[Any, ...], name: str | None
) -> tuple[str | None, Any]:
    """(name, value) of `what(value)`, `what(name, value)` or `what(value, name=...)`."""
    if len(args) == 2 and name is None:
        name, found = args
        if not isinstance(name, str):
            raise InvalidArguments(
                f"{what}(name, {value}): the name must be a string, got {name!r}"
            )
    elif len(args) == 1:
        (found,) = args
    else:
        raise InvalidArguments(
            f"{what} takes a {value}, or a name and a {value} "
            f'(e.g. {what}("nap", ...)); got {len(args)} positional argument(s)'
            + (" and name=" if name is not None else "")
        )
    if name is not None:
        check_name(name, "sleep name")
    return name, found


@usage.checked("cairn.check_cancelled")
def check_cancelled() -> None:
    """Raise `cairn.Cancelled` if this run was cancelled (call it in long steps)."""
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.check_cancelled()")
    assert ctx is not None
    ctx.check_cancelled()


@usage.checked("cairn.wait_for_event")
def wait_for_event(
    name: str, *, timeout: Any = None, default: Any = context.MISSING
) -> Awaitable[Any]:
    """Wait for the next event `name` sent to this run and return its payload.

    Events queue per name (FIFO) and each wait consumes one, so an event sent before the
    wait is kept. While waiting the run is WAITING and holds no worker slot.

    Args:
        name: The event name.
        timeout: How long to wait (a duration); None waits forever.
        default: Returned on timeout instead of raising.

    Raises:
        EventTimeout: the timeout passed and no default was given.
    """
    check_name(name, "event name")
    seconds = _seconds(timeout, f"timeout of wait_for_event({name!r})")
    ctx = context.current("cairn.wait_for_event()")
    return ctx.wait_for_event(name, seconds, default)  # type: ignore[no-any-return]


@usage.checked("cairn.receive")
def receive(topic: str, *, max_messages: int = 1, timeout: Any = None) -> Awaitable[list[Any]]:
    """Take up to `max_messages` queued events named `topic`, oldest first (a mailbox).

    One call adds one history entry: the messages it took, or its timeout. With nothing
    queued the run is WAITING, holding no worker slot, until an event `topic` is sent or
    the timeout passes; it then takes what is queued, up to `max_messages`. The events
    are those `wait_for_event` takes (`engine.send_event`, `cairn send`): each is taken
    once, by whichever call asks first.

    Args:
        topic: The event name.
        max_messages: The most events one call takes (an int, at least 1).
        timeout: How long to wait for the first event (a duration); None waits forever;
            0 takes what is queued without waiting.

    Returns:
        The payloads, oldest first; an empty list on timeout.

    Raises:
        ValueError: `max_messages` is not an int of at least 1, `topic` is not a name
            (cairn.InvalidName), or `timeout` is not a duration.
    """
    check_name(topic, "topic of cairn.receive")
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
        raise InvalidValue(f"cairn.receive max_messages must be an int >= 1, got {max_messages!r}")
    seconds = _seconds(timeout, f"timeout of receive({topic!r})")
    ctx = context.current("cairn.receive()")
    return ctx.receive(topic, max_messages, seconds)  # type: ignore[no-any-return]


@usage.checked("cairn.create_hook")
def create_hook(name: str, *, timeout: Any = None, schema: Any = None) -> Awaitable[Any]:
    """Create a single-use callback; `await` it for a Hook whose `token` outsiders call.

    Args:
        name: Hook name (stable across code versions).
        timeout: How long the hook stays callable (a duration); None: until the run ends.
            `await hook` raises EventTimeout after that.
        schema: A JSON Schema dict or a pydantic model class the payload must fit, checked
            like a human task's form: `engine.resume_hook` and `POST /api/v1/hooks/{token}`
            refuse a payload that does not fit with InvalidSubmission (HTTP 422) and leave
            the hook usable. With a model, `await hook` returns a model instance.
    """
    check_name(name, "hook name")
    seconds = _seconds(timeout, f"timeout of hook {name!r}")
    ctx = context.current("cairn.create_hook()")
    return ctx.create_hook(name, seconds, schema)  # type: ignore[no-any-return]


@usage.checked("cairn.human_task")
def human_task(
    name: str,
    *,
    title: str,
    data: Any = None,
    form: Any = None,
    assignee: str | None = None,
    timeout: Any = None,
) -> Awaitable[Any]:
    """Ask a person to fill in a form; returns the submitted values.

    Args:
        name: Task name (stable across code versions).
        title: What the person sees.
        data: Facts shown with the task.
        form: A JSON Schema dict or a pydantic model class (then a model instance returns).
        assignee: Who should act: a name (the name rule, as the task filters and a
            submission's `by` have it), so the task can be found by it.
        timeout: How long the task stays open (a duration); EventTimeout after that.
    """
    check_name(name, "human task name")
    if assignee is not None:
        check_name(assignee, "assignee")
    seconds = _seconds(timeout, f"timeout of human task {name!r}")
    ctx = context.current("cairn.human_task()")
    return ctx.human_task(name, title, data, form, assignee, seconds)  # type: ignore[no-any-return]


@usage.checked("cairn.emit")
def emit(event_type: str, payload: Any = None, *, key: str | None = None) -> Awaitable[list[str]]:
    """Start the workflows subscribed to `event_type` (`@cairn.workflow(on=...)`).

    A durable operation: the runs are started once and replay returns the same ids. Each
    subscribed workflow gets `payload` as its single argument. An event type with no
    subscriber starts nothing and returns [].

    Args:
        event_type: The event type, e.g. "order.created".
        payload: The event's data (stored like workflow arguments).
        key: Remembered per event type: emitting the same key again, from any run or
            process, starts nothing new and returns the same run ids.

    Returns:
        The ids of the runs started (or found, for a key emitted before).

    Raises:
        NotInRun: outside workflow code (use `await engine.emit(...)` there).
    """
    if context.in_run() is None:
        raise NotInRun(
            "cairn.emit() works in workflow code only; outside a run, use `await engine.emit(...)`"
        )
    ctx = context.current("cairn.emit()")
    return ctx.emit(event_type, payload, key)  # type: ignore[no-any-return]


@usage.checked("cairn.set_columns")
def set_columns(**values: Any) -> None:
    """Record searchable facts about this run (order number, customer, status)."""
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.set_columns()")
    assert ctx is not None
    ctx.set_columns(values)


@usage.checked("cairn.progress")
def progress(message: str, *, current: float | None = None, total: float | None = None) -> None:
    """Record this run's progress, shown by `cairn runs show` and `cairn run`."""
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.progress()")
    assert ctx is not None
    ctx.progress(message, current, total)


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    return durations.parse(value, what=what).total_seconds()


@usage.checked("cairn.start_child")
def start_child(
    workflow: Any, *args: Any, run_id: str | None = None, detached: bool = False, **kwargs: Any
) -> Awaitable[Any]:
    """Start `workflow` as a child run without waiting; `await handle.result()` later.

    Args:
        workflow: A @cairn.workflow.
        *args: Its positional arguments.
        run_id: The child's id (default: derived from this run's id and the call).
        detached: Keep the child running when this run ends or is cancelled.
        **kwargs: Its keyword arguments.
    """
    from cairn.authoring.definitions import definition_of

    found = definition_of(workflow)
    if found is None:
        raise InvalidArguments(f"cairn.start_child needs a @cairn.workflow, got {workflow!r}")
    workflow = found
    if run_id is not None:
        check_name(run_id, "child run_id")
    ctx = context.current("cairn.start_child()")
    return ctx.start_child(workflow, args, kwargs, run_id, detached)  # type: ignore[no-any-return]


@usage.checked("cairn.continue_as_new")
def continue_as_new(*args: Any, **kwargs: Any) -> NoReturn:
    """End this run as CONTINUED; a fresh run of the workflow gets these arguments.

    The new run starts with an empty history. Does not return.
    """
    context.current("cairn.continue_as_new()").continue_as_new(args, kwargs)
    raise AssertionError("continue_as_new returned")  # pragma: no cover


@usage.checked("cairn.patched")
def patched(change_id: str) -> bool:
    """True if this run takes the new code path of change `change_id`.

    A run that reaches this point for the first time under code that has the patch gets
    True, and the decision is recorded in its history. A run whose history shows it went
    past this point before the patch existed gets False, so it replays on the old path.
    Call it from workflow code, never inside a step; ids follow the name rule.
    """
    return context.current("cairn.patched()").patched(change_id)


@usage.checked("cairn.deprecate_patch")
def deprecate_patch(change_id: str) -> None:
    """Mark where `patched(change_id)` was, once every run before the patch has finished.

    Runs take the new path. A run that still predates the patch fails here with
    NonDeterminismError naming it (rather than later at a step that does not match), and
    `cairn check --db` reports such runs before a deploy.
    """
    context.current("cairn.deprecate_patch()").deprecate_patch(change_id)


@usage.checked("cairn.shield")
def shield() -> Any:
    """`async with cairn.shield():` cleanup inside runs even after cancel or pause."""
    from cairn.authoring.shield import Shield

    return Shield()


@usage.checked("cairn.stream")
def stream(name: str) -> Any:
    """The run's durable stream `name`, to write chunks its readers see as they come.

    In a step: `s = cairn.stream("tokens")`, `await s.write(chunk)` (JSON values or
    text), `await s.close()`; in a sync step `s.write_sync(chunk)`, `s.close_sync()`.
    Chunks are batched into commits and all stored before the step's outcome. A failed
    attempt's chunks are voided for readers (a reset) and the retry streams again. In
    workflow code each write commits once: a replay writes nothing again. Readers:
    `engine.read_stream(run_id, name)`; see docs/explanation/streams.md.

    Raises:
        NotInRun: outside a run.
        ValueError: an empty or too long name.
        Unsupported: in a step on a step queue (its worker does not hold the run).
    """
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.stream()")
    assert ctx is not None
    return ctx.stream(name)
