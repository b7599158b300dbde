"""LiveRun: the RunContext of one executing attempt of a run (journal, store, clock).

LiveRun is the hub; its concerns live beside it, each building on the one before:
core/live_attempt.py (the attempt: threads, steps in flight, waits deciding, closing),
core/live_steps.py (the journal cursor, step calls and checkpoint commits),
core/live_waits.py (sleeps, events, hooks, human tasks, receive). Children,
continue_as_new, emits and the run's columns and progress are here. None of them imports
this module.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cairn.core import children, emits, scheduled_starts, streams
from cairn.core.live_waits import LiveWaits
from cairn.core.run_meta import MetaWriter, column_texts, progress_text
from cairn.core.signals import ContinueAsNew

if TYPE_CHECKING:
    from cairn.authoring.workflow import WorkflowDef


class LiveRun(LiveWaits):
    """One attempt of one run: replays recorded outcomes and records new ones."""

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Start `workflow` as a child run and wait for its result."""

        async def run_child() -> Any:
            handle = await children.start_child(
                self, workflow, args, kwargs, run_id=None, detached=False
            )
            return await children.child_result(self, handle)

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
        coro = children.start_child(self, workflow, args, kwargs, run_id=run_id, detached=detached)
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
        return scheduled_starts.schedule(self, workflow, args, kwargs, run_id, run_at, delay)

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """End this run as CONTINUED; a fresh run takes `args` and `kwargs`."""
        self.journal.raise_if_leaving()  # in a `finally:` of a run that parks: not now
        raise ContinueAsNew(args, kwargs)

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        """Start the subscribers of `event_type` once; their run ids (replay returns them)."""
        emits.check(event_type, key)
        return self.deliver(emits.emit(self, event_type, payload, key))

    def stream(self, name: str) -> Any:
        """The run's durable stream `name` (core/streams.py)."""
        if self.streams is None:
            self.streams = streams.StreamWriters(self)
        return self.streams.open(name)

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

    async def flush_meta(self) -> None:
        """Wait for background column/progress writes (before the run finishes)."""
        if self._meta is not None:
            await self._meta.flush()
