"""ScheduleControl: schedules in the database, behind `engine.schedules` and the CLI.

Firing ticks is the scheduler's job (runtime/scheduler.py); this module creates, lists,
pauses, resumes, deletes and triggers schedules, and stores those declared in code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cairn import arguments
from cairn.authoring import schedules
from cairn.authoring.schedule_ticks import ScheduleDef
from cairn.blobs import BlobUnwritable
from cairn.codecs import sealed
from cairn.errors import DuplicateSchedule, ScheduleNotFound, TransientWorkflow
from cairn.names import findable
from cairn.runtime.handle import RunHandle
from cairn.store.programs import schedules as schedule_ops
from cairn.store.records import ScheduleRecord

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A stored schedule, as `engine.schedules.list()` and `cairn schedules list` show it."""

    id: str
    """The schedule's id."""
    workflow: str
    """Name of the workflow each tick starts."""
    cron: str | None
    """The cron expression, or None for an `every` schedule."""
    every: timedelta | None
    """The interval, or None for a cron schedule."""
    tz: str
    """Time zone the cron expression is read in."""
    overlap: str
    """skip, buffer_one, allow or cancel_other."""
    catchup: timedelta
    """How far back missed ticks are still run after downtime."""
    args: tuple[Any, ...]
    """Positional arguments of each run."""
    kwargs: dict[str, Any]
    """Keyword arguments of each run."""
    paused: bool
    """True while paused (no ticks fire)."""
    next_tick: datetime | None
    """When the next tick is due (UTC)."""
    buffered_tick: datetime | None
    """A tick waiting for the active run to end (buffer_one), or None."""
    last_run_id: str | None
    """The run started most recently by this schedule."""
    source: str
    """"code" (declared with cairn.schedule) or "api" (created at run time)."""
    created_at: datetime
    """When the schedule was first stored."""
    updated_at: datetime
    """When the schedule last changed (a tick fired, a pause, a new definition)."""


def _utc(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def spec_of(record: ScheduleRecord) -> ScheduleDef:
    """The tick arithmetic of a stored schedule (its arguments stay serialized)."""
    return ScheduleDef(
        id=record.schedule_id,
        workflow=record.workflow,
        cron=record.cron,
        every=record.every,
        tz=record.tz,
        overlap=record.overlap,
        catchup=record.catchup,
    )


class ScheduleControl:
    """Create, list, pause, resume, delete and trigger schedules."""

    def __init__(self, control: ControlView) -> None:
        self._control = control
        # Set by this process's scheduler: look at the schedules again now.
        self.on_change: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def record(self, defn: ScheduleDef, *, source: str, now: float | None = None) -> ScheduleRecord:
        """The stored form of `defn`, its first tick the next one from `now` (else now)."""
        control = self._control
        now = control.clock.now() if now is None else now
        known = control.registry.workflows.get(defn.workflow)
        if known is not None and not known.durable:
            raise TransientWorkflow(known.name, schedules.NOT_SCHEDULED)
        values, named = defn.args, defn.kwargs
        if known is not None:  # checked and converted like a start's (InvalidArguments)
            values, named = arguments.fit(known.fn, values, named, workflow=known.name)
        args = control.serializer.dumps(
            {"args": list(values), "kwargs": named},
            what=f"arguments of schedule {defn.id!r}",
        )
        return ScheduleRecord(
            schedule_id=defn.id,
            workflow=defn.workflow,
            cron=defn.cron,
            every=defn.every,
            tz=defn.tz,
            overlap=defn.overlap,
            catchup=defn.catchup,
            args=args,
            queue=known.queue if known is not None else None,
            max_recoveries=known.max_recoveries if known is not None else 8,
            source=source,
            next_tick=defn.next_after(now),
            created_at=now,
            updated_at=now,
        )

    def info(self, record: ScheduleRecord) -> ScheduleInfo:
        """The public view of a stored schedule."""
        try:
            payload = self._control.serializer.loads(record.args)
        except Exception:  # not decodable here: show the text, or "encrypted (k1)"
            payload = {"args": [sealed.shown(record.args) or record.args], "kwargs": {}}
        return ScheduleInfo(
            id=record.schedule_id,
            workflow=record.workflow,
            cron=record.cron,
            every=None if record.every is None else timedelta(seconds=record.every),
            tz=record.tz,
            overlap=record.overlap,
            catchup=timedelta(seconds=record.catchup),
            args=tuple(payload.get("args", ())),
            kwargs=dict(payload.get("kwargs", {})),
            paused=bool(record.paused),
            next_tick=_utc(record.next_tick),
            buffered_tick=_utc(record.buffered_tick),
            last_run_id=record.last_run_id,
            source=record.source,
            created_at=_utc(record.created_at) or datetime.now(UTC),
            updated_at=_utc(record.updated_at) or datetime.now(UTC),
        )

    async def declare(
        self, declared: Iterable[ScheduleDef], *, now: float | None = None
    ) -> list[tuple[ScheduleDef, BlobUnwritable]]:
        """Store schedules declared in code (new ones start at their next tick from `now`).

        A stored schedule keeps its next tick, so ticks missed while no engine ran are
        caught up, unless its timing changed; a pause by an operator stays. Returns those
        whose large arguments the blob store did not take, with its refusal: nothing of
        them is stored, and the caller declares them again later (runtime/scheduler.py).
        """
        unstored = []
        stored = False
        for defn in declared:
            try:
                record = self.record(defn, source="code", now=now)
            except BlobUnwritable as exc:
                unstored.append((defn, exc))
                continue
            await self._control.store.write(schedule_ops.sync_schedule(record))
            stored = True
        if stored:
            self._changed()
        return unstored

    async def create(
        self,
        id: str,
        workflow: Any,
        *,
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
        overlap: str = "skip",
        catchup: Any = "1h",
        args: Any = (),
        kwargs: dict[str, Any] | None = None,
        allow_unknown: bool = False,
    ) -> ScheduleInfo:
        """Create a schedule in the database; its first run is at its next tick.

        Takes the options of `cairn.schedule`. Its arguments are checked and converted
        like those of `engine.start` when this process imports the workflow.

        Raises:
            ValueError: a bad option.
            UnknownWorkflow: a workflow name nobody knows (see `engine.start`), unless
                `allow_unknown`.
            InvalidArguments: arguments that do not fit the workflow (a TypeError).
            DuplicateSchedule: a schedule with this id exists with another definition
                (creating one with the same definition returns the existing schedule).
        """
        defn = schedules.define(
            workflow,
            cron=cron,
            every=every,
            tz=tz,
            overlap=overlap,
            catchup=catchup,
            args=args,
            kwargs=kwargs,
            id=id,
        )
        if defn.workflow not in self._control.registry.workflows and not allow_unknown:
            await self._control.names.check(defn.workflow)
        record = self.record(defn, source="api")
        if defn.workflow not in self._control.registry.workflows:
            declared = await self._control.names.declared(defn.workflow)
            if declared is not None:  # as its workers declare it (see RunControl.start)
                record = replace(record, queue=declared[0], max_recoveries=declared[1])
        if not await self._control.store.write(schedule_ops.create_schedule(record)):
            existing = await self._control.store.read(schedule_ops.get_schedule(id))
            if existing is not None and _definition(existing) == _definition(record):
                return self.info(existing)  # created before (a retried call): the same one
            raise DuplicateSchedule(
                f"schedule {id!r} already exists with another definition; delete it first "
                "or pick another id"
            )
        self._changed()
        return self.info(record)

    async def list(self) -> list[ScheduleInfo]:
        """Every schedule, by id."""
        return [
            self.info(record)
            for record in await self._control.store.read(schedule_ops.list_schedules())
        ]

    async def get(self, id: str) -> ScheduleInfo:
        """One schedule; ScheduleNotFound if unknown."""
        _findable(id)
        record = await self._control.store.read(schedule_ops.get_schedule(id))
        if record is None:
            raise ScheduleNotFound(id)
        return self.info(record)

    async def pause(self, id: str) -> ScheduleInfo:
        """Stop firing ticks (a buffered tick is dropped); runs already started go on."""
        _findable(id)
        store = self._control.store
        record = await store.write(
            schedule_ops.set_schedule_paused(
                id, paused=True, next_tick=None, now=self._control.clock.now()
            )
        )
        if record is None:
            raise ScheduleNotFound(id)
        return self.info(record)

    async def resume(self, id: str) -> ScheduleInfo:
        """Fire ticks again from the next one; ticks of the paused time are not caught up."""
        _findable(id)
        store = self._control.store
        current = await store.read(schedule_ops.get_schedule(id))
        if current is None:
            raise ScheduleNotFound(id)
        now = self._control.clock.now()
        next_tick = current.next_tick
        if current.paused or next_tick is None:
            next_tick = spec_of(current).next_after(now)
        record = await store.write(
            schedule_ops.set_schedule_paused(id, paused=False, next_tick=next_tick, now=now)
        )
        if record is None:
            raise ScheduleNotFound(id)
        self._changed()
        return self.info(record)

    async def delete(self, id: str) -> None:
        """Delete a schedule; its runs are left alone.

        A schedule declared in code comes back when an engine with that code starts.
        """
        _findable(id)
        if not await self._control.store.write(schedule_ops.delete_schedule(id)):
            raise ScheduleNotFound(id)

    async def trigger(self, id: str) -> RunHandle:
        """Start one run of the schedule now, whatever its overlap policy."""
        _findable(id)
        now = self._control.clock.now()
        run_id = f"sched:{id}:trigger:{uuid.uuid4().hex[:12]}"
        run = await self._control.store.write(
            schedule_ops.trigger_schedule(id, run_id=run_id, now=now)
        )
        if run is None:
            raise ScheduleNotFound(id)
        self._control.wake_local()
        return RunHandle(self._control, run.run_id)


def _findable(id: str) -> None:
    """ScheduleNotFound for an id no schedule can have (a NUL, say), before the store sees it."""
    if not findable(id, "schedule id"):
        raise ScheduleNotFound(id)


def _definition(record: ScheduleRecord) -> tuple[object, ...]:
    """What makes two schedules the same schedule (not their tick state or pause)."""
    return (
        record.workflow,
        record.cron,
        record.every,
        record.tz,
        record.overlap,
        record.catchup,
        record.args,
        record.queue,
    )
