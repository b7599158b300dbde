"""SqlStore's schedules and event triggers (see store/programs/schedules.py)."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.store import _sql
from cairn.store.programs import schedules
from cairn.store.records import (
    Fired,
    Lease,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    Subscription,
)
from cairn.store.sql_store.base import SqlBase, rows_of


class SqlSchedules(SqlBase):
    """Schedules and event triggers."""

    async def create_schedule(self, schedule: ScheduleRecord) -> bool:
        """Insert a new schedule; False if its id is taken."""
        return await self.write(lambda: schedules.create_schedule(schedule))

    async def sync_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Insert a declared schedule or update the stored one (see Store.sync_schedule)."""
        return await self.write(lambda: schedules.sync_schedule(schedule))

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or None."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_SCHEDULE, (schedule_id,)))
        return _sql.schedule_from_row(rows[0]) if rows else None

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_SCHEDULES))
        return [_sql.schedule_from_row(row) for row in rows]

    async def set_schedule_paused(
        self, schedule_id: str, *, paused: bool, next_tick: float | None, now: float
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule; None if unknown."""
        return await self.write(
            lambda: schedules.set_schedule_paused(schedule_id, paused, next_tick, now)
        )

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False if unknown."""
        return await self.write(lambda: schedules.delete_schedule(schedule_id))

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules with a tick due by `now` or a buffered tick."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_DUE_SCHEDULES, (now, limit)))
        return [_sql.schedule_from_row(row) for row in rows]

    async def next_schedule_tick(self) -> float | None:
        """The earliest next tick of an unpaused schedule, None if there is none."""
        rows = await self.read(lambda: rows_of(_sql.NEXT_SCHEDULE_TICK))
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: float,
        new_next: float,
        ticks: Sequence[tuple[float, str]],
        now: float,
    ) -> Fired | None:
        """Advance a schedule by compare-and-set and fire its ticks (see Store.fire_schedule)."""
        return await self.write(
            lambda: schedules.fire_schedule(schedule_id, expected_next, new_next, ticks, now)
        )

    async def release_buffered(
        self, schedule_id: str, *, tick: float, run_id: str, now: float
    ) -> Fired | None:
        """Start a buffered tick whose blocking run has ended; None if not (yet)."""
        return await self.write(lambda: schedules.release_buffered(schedule_id, tick, run_id, now))

    async def trigger_schedule(
        self, schedule_id: str, *, run_id: str, now: float
    ) -> RunRecord | None:
        """Start one run of the schedule now; None if unknown."""
        return await self.write(lambda: schedules.trigger_schedule(schedule_id, run_id, now))

    # event triggers

    async def sync_subscriptions(
        self, workflows: Sequence[tuple[str, str | None, str | None, int]], *, now: float
    ) -> None:
        """Store the event types the given workflows subscribe to."""
        if workflows:
            await self.write(lambda: schedules.sync_subscriptions(workflows, now))

    async def list_subscriptions(self) -> list[Subscription]:
        """Every stored subscription."""
        return await self.read(schedules.list_subscriptions)

    async def emit_event(
        self,
        event_type: str,
        args: str,
        *,
        key: str | None,
        now: float,
        local: Sequence[Subscription] = (),
        lease: Lease | None = None,
        step: StepRecord | None = None,
        trace_context: str | None = None,
    ) -> list[str]:
        """Start the subscribers of `event_type` (see Store.emit_event)."""
        return await self.write(
            lambda: schedules.emit_event(
                event_type, args, key, now, local, lease, step, trace_context
            )
        )
