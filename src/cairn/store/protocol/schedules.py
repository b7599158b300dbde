"""The schedules part of the Store protocol: schedules and event triggers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cairn.store.records import (
    Fired,
    Lease,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    Subscription,
)


class ScheduleStore(Protocol):
    """Schedules and event triggers."""

    async def create_schedule(self, schedule: ScheduleRecord) -> bool:
        """Insert a new schedule; False (nothing written) if a schedule has its id."""
        ...

    async def sync_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Insert a schedule declared in code, or update the stored one to match it.

        An update keeps the operator's state (paused, last run, buffered tick) and the
        stored next tick, unless cron, every or tz changed (then `schedule.next_tick`
        applies). Returns the stored schedule.
        """
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or None when no schedule has that id."""
        ...

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""
        ...

    async def set_schedule_paused(
        self, schedule_id: str, *, paused: bool, next_tick: float | None, now: float
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule; a buffered tick is dropped.

        A non-None `next_tick` replaces the stored one. Returns the schedule after, or
        None (nothing written) if unknown.
        """
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule (its runs are left alone); False if unknown."""
        ...

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        """Up to `limit` unpaused schedules with a tick due by `now` or a buffered tick.

        Earliest next tick first.
        """
        ...

    async def next_schedule_tick(self) -> float | None:
        """The earliest next tick of an unpaused schedule, or None."""
        ...

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: float,
        new_next: float,
        ticks: Sequence[tuple[float, str]],
        now: float,
    ) -> Fired | None:
        """Fire ticks of a schedule, once across every engine, in one transaction.

        Moves `next_tick` from `expected_next` to `new_next` (a compare-and-set: None and
        nothing written if the stored next tick differs or the schedule is paused), then
        applies the overlap policy to each (tick, run_id) in order against the schedule's
        latest run (following continue_as_new): `allow` starts a run, `skip` skips while
        that run is active, `buffer_one` keeps the first such tick as `buffered_tick`,
        `cancel_other` cancels that run (as `control_run`) and starts. A started run is
        PENDING with `scheduled_at` = its tick, and becomes the latest run.
        """
        ...

    async def release_buffered(
        self, schedule_id: str, *, tick: float, run_id: str, now: float
    ) -> Fired | None:
        """Start the buffered `tick` as run `run_id` if the latest run has ended.

        None (nothing written) while it is active, or if `tick` is no longer buffered.
        """
        ...

    async def trigger_schedule(
        self, schedule_id: str, *, run_id: str, now: float
    ) -> RunRecord | None:
        """Start one run of the schedule now (no overlap check); it becomes the latest run.

        None (nothing written) if unknown.
        """
        ...

    # event triggers

    async def sync_subscriptions(
        self, workflows: Sequence[tuple[str, str | None, str | None, int]], *, now: float
    ) -> None:
        """Store what each `(workflow, event_type, queue, max_recoveries)` subscribes to.

        A workflow listed with event_type None loses its subscriptions; workflows not
        listed are left alone (other deployments may define them).
        """
        ...

    async def list_subscriptions(self) -> list[Subscription]:
        """Every stored subscription, by event type then workflow."""
        ...

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
        """Start one PENDING run (with `args`) per subscriber of `event_type`; their ids.

        Subscribers are the stored subscriptions plus `local` ones (which win for the same
        workflow). With a `key`, a (event_type, key) already emitted returns the ids
        stored then and starts nothing; a new one stores its ids when it started any run
        (run ids `emit_run_id(...)`). With `step`, the emit is part of the run held by
        `lease`: LeaseLost (nothing written) if not held, else `step` is journaled with
        the ids as its result, in the same transaction. The runs keep `trace_context`
        (the emitter's trace, see observability/propagation.py).
        """
        ...
