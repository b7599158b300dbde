"""The seam between user code and the engine: the RunContext interface and where it lives.

The interface is declared here; `cairn.core.live_run` implements it. In-run functions look
up the active context with `current()`, which raises NotInRun outside a run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar, Token
from datetime import datetime
from typing import Any

from cairn import config
from cairn.errors import Cancelled, NotInRun
from cairn.models import RunInfo

# What a run is asked to call: a StepDef or a WorkflowDef (authoring/definitions.py).
# Calling one asks the run's context, so this module, below them, names neither; the
# contexts (core/live_run.py, aws/lambda_run.py) take them by their classes.
StepDefinition = Any
WorkflowDefinition = Any

# The `default` of a wait that was given none: its timeout raises instead of returning it.
# Declared here, with the interface that takes it, so that authoring/ never imports core/.
MISSING: Any = object()


class RunContext:
    """What a run offers the code running inside it (implemented by the core)."""

    received_at: float | None = None
    """When the message of the last wait that ended in this attempt was taken (its history
    entry's finish time, seconds since the epoch), live and in a replay alike: what a
    Cloudflare-style received event's `timestamp` says."""

    def info(self) -> RunInfo:
        """Facts about this run."""
        raise NotImplementedError

    def call_step(self, step: StepDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run `step` durably: an awaitable from async workflows, the value from sync ones."""
        raise NotImplementedError

    def call_inline(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retries: Any,
        timeout: Any,
        queue: str | None = None,
    ) -> Any:
        """Run `fn` as a durable step called `name` (`cairn.run_step`), on `queue` if set."""
        raise NotImplementedError

    def call_child(
        self, workflow: WorkflowDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Start `workflow` as a child run and wait for its result."""
        raise NotImplementedError

    def start_child(
        self,
        workflow: WorkflowDefinition,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        detached: bool,
    ) -> Any:
        """Start a child run and return its handle."""
        raise NotImplementedError

    def schedule_workflow(
        self,
        workflow: WorkflowDefinition,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        run_at: Any,
        delay: Any,
    ) -> Any:
        """Start a detached run that may begin at `run_at` or after `delay` (neither: now).

        Its id; takes effect at the call: an async workflow gets an awaitable it may ignore.
        """
        raise NotImplementedError

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """End this run and continue as a fresh one."""
        raise NotImplementedError

    def sleep(self, seconds: float, name: str | None = None) -> Awaitable[None]:
        """Durable sleep for `seconds`; a `name` labels it in the history."""
        raise NotImplementedError

    def sleep_until(self, when: datetime, name: str | None = None) -> Awaitable[None]:
        """Durable sleep until `when`; a `name` labels it in the history."""
        raise NotImplementedError

    def set_columns(self, values: dict[str, Any]) -> None:
        """Record searchable facts about this run."""
        raise NotImplementedError

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        """Record this run's progress."""
        raise NotImplementedError

    def check_cancelled(self) -> None:
        """Raise Cancelled if the run was cancelled."""
        raise NotImplementedError

    def on_cancel(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Call `stop()` when the run is cancelled (default: never); returns the undo."""
        return _nothing

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        """The payload of the next event `name` sent to this run."""
        raise NotImplementedError

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        """Up to `max_messages` queued events `topic`, oldest first, as one history entry."""
        raise NotImplementedError

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        """A new single-use Hook whose payloads must fit `schema` (None: any payload)."""
        raise NotImplementedError

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        """Create a task for a person and wait for its submitted values."""
        raise NotImplementedError

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        """Durably start the workflows subscribed to `event_type`; their run ids."""
        raise NotImplementedError

    def stream(self, name: str) -> Any:
        """The run's durable stream `name` for the code running now (core/streams.py)."""
        raise NotImplementedError

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new path of patch `change_id` (see core/patches.py)."""
        raise NotImplementedError

    def deprecate_patch(self, change_id: str) -> None:
        """Mark where patch `change_id` was; fails a run that predates it."""
        raise NotImplementedError

    def resources(self) -> config.Resources:
        """The databases and tag provider the ready steps of `cairn.steps` reach by name.

        An engine's own (its arguments over pyproject.toml); this default reads
        pyproject.toml alone.
        """
        return config.resources()


_current: ContextVar[RunContext | None] = ContextVar("cairn_run", default=None)
# The step whose own code runs now, as (name, key, attempt), or None outside one: steps
# called inside a step are plain calls, and durable primitives refuse to run there. Log
# records read the key and attempt (cairn.observability.RunContextFilter).
StepFrame = tuple[str, str, int]
_in_step: ContextVar[StepFrame | None] = ContextVar("cairn_in_step", default=None)


def current(what: str = "this function") -> RunContext:
    """The active run, in workflow code; NotInRun names `what` outside one or in a step.

    A durable primitive (sleep, a wait, a child...) called from a step's own code would be
    written into the run's history by a step that is not replayed: the next replay would
    not meet it. So it is refused there, naming the step.
    """
    ctx = _current.get()
    if ctx is None:
        raise NotInRun(
            f"{what} only works inside a running workflow; start one with engine.start()"
        )
    step = _in_step.get()
    if step is not None:
        raise NotInRun(
            f"{what} cannot be called inside step {step[0]!r}: a step runs once and is not "
            "replayed; call it from the workflow"
        )
    return ctx


def active() -> RunContext | None:
    """The active run, or None outside a run (or inside a step's own code)."""
    if _in_step.get() is not None:
        return None
    return _current.get()


def in_step() -> bool:
    """True while a step's own code runs."""
    return _in_step.get() is not None


# The active run even inside a step's code, or None outside a run. This and the five
# below are the ContextVars' own bound methods, not functions around them: a step or a
# run calls each once or twice, and a Python frame costs more than the lookup it wraps.
in_run = _current.get
# Make a RunContext the active run in this context; returns a token for `leave`.
enter: Callable[[RunContext], Token[RunContext | None]] = _current.set
# Undo `enter` (with the token it returned).
leave: Callable[[Token[RunContext | None]], None] = _current.reset


# (name, key, attempt) of the step whose own code runs now; None outside one.
step_frame = _in_step.get
# Flag the current context as running the own code of a step: (name, key, attempt).
mark_in_step = _in_step.set
# Undo `mark_in_step` (with the token it returned).
unmark_in_step = _in_step.reset


@contextlib.contextmanager
def cancel_stops(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a cancel of the run calls `stop()` (on the event loop).

    For a step's code that blocks where it cannot call `check_cancelled` (a statement
    waiting for a lock, a request waiting for bytes): `stop` breaks the wait, and
    whatever the block then raises becomes `cairn.Cancelled`, which ends the step without
    a retry. Outside a step of a run, and inside `cairn.shield()`, nothing is watched.
    """
    ctx = in_run()
    if ctx is None or step_frame() is None:
        yield
        return
    stopped = False

    def fire() -> None:
        nonlocal stopped
        stopped = True
        stop()

    undo = ctx.on_cancel(fire)
    try:
        yield
    except BaseException as exc:
        if not stopped:
            raise
        if isinstance(exc, asyncio.CancelledError):  # `stop` cancelled this task
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        ctx.check_cancelled()  # Cancelled with the run's reason
        raise Cancelled("cancelled") from exc
    finally:
        undo()


def _nothing() -> None:
    return None
