"""LiveRun: the RunContext of one executing attempt of a run (journal, store, clock).

LiveRun is the hub; it holds one object per concern, each made here with what it uses:
a LiveAttempt (core/live_attempt.py: the attempt's threads, steps in flight, waits
deciding, interrupts, closing), LiveSteps (core/live_steps.py: the journal cursor, step
calls and checkpoint commits, made with the attempt) and LiveWaits (core/live_waits.py:
sleeps, events, hooks, human tasks, receive, made with the steps). Children,
continue_as_new, emits and the run's columns and progress are here. None of them imports
this module.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn import config
from cairn.authoring.context import RunContext
from cairn.core import children, emits, scheduled_starts, streams, versions
from cairn.core.journal import Journal
from cairn.core.live_attempt import LiveAttempt, run_info
from cairn.core.live_steps import LiveSteps
from cairn.core.live_waits import LiveWaits
from cairn.core.run_env import RunEnv
from cairn.core.run_meta import MetaWriter, column_texts, progress_text
from cairn.core.signals import ContinueAsNew
from cairn.models import RunInfo
from cairn.store.records import AttemptRecord, RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.definitions import WorkflowDef


class LiveRun(RunContext):
    """One attempt of one run: replays recorded outcomes and records new ones."""

    def __init__(
        self,
        env: RunEnv,
        run: RunRecord,
        workflow: WorkflowDef[Any, Any],
        records: list[StepRecord],
        prior_attempts: dict[str, list[AttemptRecord]],
        *,
        epoch: int = 0,
    ) -> None:
        self.env = env
        self.run = run
        self.workflow = workflow
        self.journal = Journal(
            records,
            warn_history=env.limits.warn_history,
            max_history=env.limits.max_history,
            run_name=(run.run_id, run.workflow),
            cache_keys=workflow.names_are_cache_keys,
        )
        self.attempt = LiveAttempt(env, run, workflow, self.journal, epoch=epoch)
        # A rolling deploy: a worker of the run's own version may replay what this code
        # cannot; then the run is handed back for it rather than failed (core/versions.py).
        self.journal.elsewhere = versions.elsewhere(run, workflow, self.attempt.leave)
        self.lease = self.attempt.lease
        self.interrupts = self.attempt.interrupts
        self.steps = LiveSteps(self, self.attempt, prior_attempts)
        self._waiting: LiveWaits | None = None  # made on the first wait (most runs have none)
        self.deliver = self.attempt.deliver
        # Served by LiveSteps itself, not forwarded: a step call is per step (hot path).
        self.call_step = self.steps.call_step  # type: ignore[method-assign]
        self.call_inline = self.steps.call_inline  # type: ignore[method-assign]
        self._loop_thread = threading.get_ident()
        # Column values (JSON text) already stored, so replays write nothing new.
        self._columns: dict[str, str] = {}
        if run.columns:
            self._columns = {
                name: json.dumps(value, sort_keys=True)
                for name, value in json.loads(run.columns).items()
            }
        self._meta: MetaWriter | None = None  # made on the first columns/progress write

    @property
    def waiting(self) -> LiveWaits:
        """The run's sleeps, events, hooks, tasks and receives (core/live_waits.py)."""
        waiting = self._waiting
        if waiting is None:
            waiting = self._waiting = LiveWaits(self.steps)
        return waiting

    def info(self) -> RunInfo:
        """Facts about this run."""
        return run_info(self.run)

    def resources(self) -> config.Resources:
        """The engine's databases and tag provider (see `cairn.config.resources`)."""
        return self.env.resources

    # the journal's (core/live_steps.py)

    def patched(self, change_id: str) -> bool:
        """See core/patches.py: the marker of a new decision is stored before later writes."""
        return self.steps.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """See core/patches.py."""
        self.steps.deprecate_patch(change_id)

    def check_cancelled(self) -> None:
        """Raise Cancelled if the run was cancelled (see LiveSteps.check_cancelled)."""
        self.steps.check_cancelled()

    def on_cancel(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Call `stop()` when the run is cancelled (see Interrupts.on_cancel)."""
        return self.interrupts.on_cancel(stop)

    # waits (core/live_waits.py)

    def sleep(self, seconds: float, name: str | None = None) -> Any:
        """Durable sleep for `seconds`."""
        return self.waiting.sleep(seconds, name)

    def sleep_until(self, when: datetime, name: str | None = None) -> Any:
        """Durable sleep until `when` (naive datetimes are taken as UTC)."""
        return self.waiting.sleep_until(when, name)

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        """The payload of the next event `name` sent to this run."""
        return self.waiting.wait_for_event(name, timeout, default)

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        """Up to `max_messages` queued events `topic` (see core/mailbox.py)."""
        return self.waiting.receive(topic, max_messages, timeout)

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        """A new single-use Hook (an awaitable in async workflows, the Hook in sync ones)."""
        return self.waiting.create_hook(name, timeout, schema)

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        """Create a task for a person and wait for the submitted values."""
        return self.waiting.human_task(name, title, data, form, assignee, timeout)

    # children, continue_as_new, emits

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Start `workflow` as a child run and wait for its result."""
        steps = self.steps

        async def run_child() -> Any:
            handle = await children.start_child(
                steps, workflow, args, kwargs, run_id=None, detached=False
            )
            return await children.child_result(steps, handle)

        return self.deliver(run_child())

    def start_child(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        detached: bool,
    ) -> Any:
        """Start a child run; a ChildHandle (awaitable in async workflows)."""
        coro = children.start_child(
            self.steps, workflow, args, kwargs, run_id=run_id, detached=detached
        )
        return self.deliver(coro)

    def schedule_workflow(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        run_at: Any,
        delay: Any,
    ) -> Any:
        """Start a detached run, at `run_at` or after `delay` (core/scheduled_starts.py)."""
        return scheduled_starts.schedule(self.steps, workflow, args, kwargs, run_id, run_at, delay)

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """End this run as CONTINUED; a fresh run takes `args` and `kwargs`."""
        self.journal.raise_if_leaving()  # in a `finally:` of a run that parks: not now
        raise ContinueAsNew(args, kwargs)

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        """Start the subscribers of `event_type` once; their run ids (replay returns them)."""
        emits.check(event_type, key)
        return self.deliver(emits.emit(self.steps, event_type, payload, key))

    # columns and progress

    def stream(self, name: str) -> Any:
        """The run's durable stream `name` (core/streams.py)."""
        writers = self.attempt.streams
        if writers is None:
            writers = self.attempt.streams = streams.StreamWriters(self.steps)
        return writers.open(name)

    def set_columns(self, values: dict[str, Any]) -> None:
        """Store searchable facts about this run (written in the background, batched)."""
        changed = {
            name: text
            for name, text in column_texts(values).items()
            if self._columns.get(name) != text
        }
        if changed:
            self._columns.update(changed)
            self._write_meta(changed, None)

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        """Store this run's progress (written in the background, batched)."""
        self._write_meta(None, progress_text(message, current, total, self.env.clock.now()))

    def _write_meta(self, columns: dict[str, str] | None, progress: str | None) -> None:
        if self._meta is None:
            self._meta = MetaWriter(self.env.store, self.run.run_id, self.env.clock.now)
        if threading.get_ident() == self._loop_thread:
            self._meta.add(columns, progress)
        else:  # a sync step's thread
            self.env.loop.call_soon_threadsafe(self._meta.add, columns, progress)

    @property
    def meta_pending(self) -> bool:
        """True once columns or progress were written (`flush_meta` has work to wait for)."""
        return self._meta is not None

    async def flush_meta(self) -> None:
        """Wait for background column/progress writes (before the run finishes)."""
        if self._meta is not None:
            await self._meta.flush()
