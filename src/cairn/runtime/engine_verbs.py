"""What an Engine offers on runs: start, read, send to and act on them (`cairn.Engine`).

Engine (runtime/engine.py) wires the process (store, worker, scheduler) and is built on
this; every method here hands over to RunControl (runtime/control.py) or the deploy check.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, datetime
from typing import Any

from cairn import serialization
from cairn.authoring.definitions import WorkflowDef
from cairn.authoring.registry import Registry
from cairn.models import EventDelivery, History, RunPage, RunStatus
from cairn.runtime import deploy_check, streams, transient_rules
from cairn.runtime.control import RunControl
from cairn.runtime.deploy_check import CheckReport
from cairn.runtime.handle import RunHandle
from cairn.runtime.queues import QueueControl
from cairn.runtime.schedules import ScheduleControl
from cairn.runtime.tasks import TaskControl
from cairn.runtime.transient import PrivateEngine
from cairn.store import Store


class EngineVerbs:
    """Start runs, read them, send them events and act on them, through RunControl."""

    # Set by Engine.__init__.
    store: Store
    serializer: serialization.Serializer
    registry: Registry
    control: RunControl
    transient_runs: PrivateEngine[Any] | None

    async def start(
        self,
        workflow: WorkflowDef[Any, Any] | str | Any,
        *args: Any,
        delay: Any = None,
        run_at: datetime | date | str | None = None,
        **options: Any,
    ) -> RunHandle:
        """Start a run; see `RunControl.start` for the options (run_id, queue, delay, ...).

        `delay` (a duration, or a datetime to start at) and `run_at` (a datetime, a date
        or ISO 8601 text such as "2026-01-01"; a date is its midnight UTC, a naive time
        UTC) hold the run back until then.

        A transient workflow (durable=False) executes in this process on a private
        in-memory store: the handle answers while this engine is open, and `get`,
        `list_runs` and the database never see the run.
        """
        defn = transient_rules.definition(self.registry, workflow)
        if defn is not None and self.transient_runs is not None:
            return await self.transient_runs.start(
                defn, args, {**options, "delay": delay, "run_at": run_at}
            )
        return await self.control.start(workflow, *args, delay=delay, run_at=run_at, **options)

    async def get(self, run_id: str) -> RunHandle:
        """A handle on an existing run; RunNotFound if unknown."""
        return await self.control.get(run_id)

    async def list_runs(
        self,
        status: Any = None,
        workflow: Any = None,
        columns: dict[str, Any] | None = None,
        since: datetime | float | None = None,
        limit: int = 100,
        cursor: str | None = None,
        version: str | None = None,
        *,
        until: datetime | float | None = None,
        origin: str | None = None,
        run_id_prefix: str | None = None,
        tree: str | None = None,
    ) -> RunPage:
        """A page of runs, newest first (the filters: see `RunControl.list_runs`)."""
        return await self.control.list_runs(
            status,
            workflow,
            columns,
            since,
            limit,
            cursor,
            version,
            until=until,
            origin=origin,
            run_id_prefix=run_id_prefix,
            tree=tree,
        )

    @property
    def schedules(self) -> ScheduleControl:
        """Schedules: `create`, `list`, `get`, `pause`, `resume`, `delete`, `trigger`."""
        return self.control.schedules

    async def emit(
        self, event_type: str, payload: Any = None, *, key: str | None = None
    ) -> list[RunHandle]:
        """Start the workflows subscribed to `event_type` with `payload`; their handles.

        A `key` is remembered per event type: emitting it again starts nothing new and
        returns the same handles. With no subscriber, nothing starts and [] is returned.
        """
        return await self.control.emit(event_type, payload, key=key)

    @property
    def tasks(self) -> TaskControl:
        """The human-task inbox: `list`, `get`, `submit`."""
        return self.control.tasks

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Send an event to a run; it is kept until a wait of the run takes it.

        RunNotFound / RunFinished for a bad target. The event is kept for the run's wait
        for `name`; the answer says whether a wait of the run takes it now (`awaited`),
        and if not what the run waits for (`note`).
        """
        return await self.control.send_event(run_id, name, payload, idempotency_key=idempotency_key)

    async def resume_hook(self, token: str, payload: Any = None) -> str:
        """Call a hook once with its token and a payload.

        HookNotFound for an unknown, used or expired token.
        """
        return await self.control.resume_hook(token, payload)

    async def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run: it ends CANCELLED at its current or next durable point."""
        return await self.control.cancel(run_id)

    async def pause(self, run_id: str) -> RunStatus:
        """Pause a run at its next durable point (at once if it sleeps, waits or is queued)."""
        return await self.control.pause(run_id)

    async def resume(self, run_id: str) -> RunStatus:
        """Resume a paused run; timers and events that came meanwhile are honoured."""
        return await self.control.resume(run_id)

    async def retry(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Continue a FAILED run from its failed step (completed steps do not run again).

        It is the run's next execution; `by` names who asked, and the history keeps it
        with the execution.
        """
        return await self.control.retry(run_id, by=by)

    async def restart(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Start a new run of the same workflow with the same input.

        It records its source and `by`.
        """
        return await self.control.restart(run_id, by=by)

    async def fork(self, run_id: str, from_step: int, *, by: str | None = None) -> RunHandle:
        """Start a new run reusing the recorded steps before a chosen history entry.

        That entry is `from_step`; the new run records its source, `from_step` and `by`.
        """
        return await self.control.fork(run_id, from_step, by=by)

    @property
    def queues(self) -> QueueControl:
        """Queue limits: `list`, `get`, `update` (live, no restart needed)."""
        return self.control.queues

    async def history(self, run_id: str, *, after: int = 0, limit: int | None = None) -> History:
        """The run's durable operations in order; with `limit`, one page after entry `after`.

        A page's `next_after` is the `after` of the next page (None on the last one).
        """
        return await self.control.history(run_id, after=after, limit=limit)

    def read_stream(
        self, run_id: str, name: str, *, after: int | None = None
    ) -> AsyncIterator[Any]:
        """The values run `run_id` writes to stream `name`, in order, as they come.

        `async for value in engine.read_stream(run_id, "tokens")`: ends when the stream is
        closed or the run has finished. Where an attempt's chunks are void (it failed, or
        its worker died), a `cairn.StreamReset` comes instead; the retry streams again.
        `after`: the seq of the last item already seen (docs/explanation/streams.md).
        """
        return streams.read_stream(self.store, self.serializer, run_id, name, after=after)

    async def check(self, *, workflow: str | None = None, sample: int | None = None) -> CheckReport:
        """Replay unfinished runs against the code imported now; nothing runs or is written.

        Args:
            workflow: Only runs of this workflow (default: every workflow).
            sample: At most this many runs per workflow (default: all of them).

        Returns:
            A CheckReport: per workflow and version, runs that replay cleanly and where
            each other run diverges; per `cairn.patched()` id, runs that still predate it.
        """
        return await deploy_check.check(
            self.store, self.registry, self.serializer, workflow=workflow, sample=sample
        )
