"""Programs that start runs by themselves: schedule ticks and event triggers.

See `programs` for what a program is. A tick and the runs it starts are one
transaction, and so are an emit and the runs of its subscribers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import quote, unquote

from cairn import ids
from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs.base import FINISHED, Program, Sql, all_rows, one_row, wakes
from cairn.store.programs.control import control_run
from cairn.store.programs.journal import record_step
from cairn.store.protocol import LeaseLost
from cairn.store.records import (
    Fired,
    Lease,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    Subscription,
)


def create_schedule(schedule: ScheduleRecord) -> Program[bool]:
    """Insert a new schedule; False (nothing written) if its id is taken."""
    return bool((yield Sql(_sql.INSERT_SCHEDULE, _sql.schedule_params(schedule))))


# The columns of a schedule that its declaration sets (the rest is tick state).
_SCHEDULE_DEFINITION = (
    "workflow",
    "cron",
    "every",
    "tz",
    "overlap",
    "catchup",
    "args",
    "queue",
    "max_recoveries",
    "source",
)


def sync_schedule(schedule: ScheduleRecord) -> Program[ScheduleRecord]:
    """Insert a declared schedule, or bring the stored one up to date with it.

    Operator state (paused, last run, a buffered tick) is kept, and so is the next tick
    unless the timing (cron, every, tz) changed, so ticks missed while no engine ran are
    still caught up.
    """
    if (yield Sql(_sql.INSERT_SCHEDULE, _sql.schedule_params(schedule))):
        return schedule
    row = yield one_row(_sql.SELECT_SCHEDULE, (schedule.schedule_id,))
    stored = _sql.schedule_from_row(row)
    definition = _SCHEDULE_DEFINITION
    if all(getattr(stored, name) == getattr(schedule, name) for name in definition):
        return stored
    timing = ("cron", "every", "tz")
    retimed = any(getattr(stored, name) != getattr(schedule, name) for name in timing)
    next_tick = schedule.next_tick if retimed else stored.next_tick
    params = [getattr(schedule, name) for name in definition]
    yield Sql(
        _sql.UPDATE_SCHEDULE_DEFINITION,
        (*params, next_tick, schedule.updated_at, schedule.schedule_id),
    )
    return _sql.schedule_from_row((yield one_row(_sql.SELECT_SCHEDULE, (schedule.schedule_id,))))


def set_schedule_paused(
    schedule_id: str, paused: bool, next_tick: float | None, now: float
) -> Program[ScheduleRecord | None]:
    """Pause or resume a schedule (resuming sets `next_tick`); None if unknown."""
    params = (1 if paused else 0, next_tick, now, schedule_id)
    if not (yield Sql(_sql.SET_SCHEDULE_PAUSED, params)):
        return None
    return _sql.schedule_from_row((yield one_row(_sql.SELECT_SCHEDULE, (schedule_id,))))


def delete_schedule(schedule_id: str) -> Program[bool]:
    """Delete a schedule; False if unknown. Its runs are left alone."""
    return bool((yield Sql(_sql.DELETE_SCHEDULE, (schedule_id,))))


@wakes
def fire_schedule(
    schedule_id: str,
    expected_next: float,
    new_next: float,
    ticks: Sequence[tuple[float, str]],
    now: float,
) -> Program[Fired | None]:
    """Move the next tick from `expected_next` to `new_next` and fire `ticks`.

    `ticks` are (tick time, run id) pairs. None (nothing written) when the next tick is no
    longer `expected_next`: another engine fired it, or the schedule was paused or changed.
    """
    if not (yield Sql(_sql.ADVANCE_SCHEDULE, (new_next, now, schedule_id, expected_next))):
        return None
    schedule = _sql.schedule_from_row((yield one_row(_sql.SELECT_SCHEDULE, (schedule_id,))))
    started: list[str] = []
    cancelled: list[str] = []
    skipped = 0
    buffered = schedule.buffered_tick
    last = schedule.last_run_id
    for tick, run_id in ticks:
        active = None
        if schedule.overlap != "allow":
            active = yield from _active_run(last)
        if active is not None:
            if schedule.overlap == "buffer_one" and buffered is None:
                buffered = tick
                continue
            if schedule.overlap != "cancel_other":
                skipped += 1
                continue
            yield from control_run(active, "cancel", now)
            cancelled.append(active)
        yield Sql(_sql.INSERT_RUN, _sql.run_params(_scheduled_run(schedule, run_id, tick, now)))
        started.append(run_id)
        last = run_id
    yield Sql(_sql.SET_SCHEDULE_STATE, (buffered, last, now, schedule_id))
    return Fired(started, cancelled, skipped, buffered is not None)


@wakes
def release_buffered(
    schedule_id: str, tick: float, run_id: str, now: float
) -> Program[Fired | None]:
    """Start the buffered `tick` once the schedule's active run has ended.

    None (nothing written) while that run is active, or if the tick is no longer buffered.
    """
    row = yield one_row(_sql.SELECT_SCHEDULE, (schedule_id,))
    if row is None:
        return None
    schedule = _sql.schedule_from_row(row)
    if schedule.paused or schedule.buffered_tick != tick:
        return None
    if (yield from _active_run(schedule.last_run_id)) is not None:
        return None
    if not (yield Sql(_sql.TAKE_BUFFERED, (now, schedule_id, tick))):
        return None
    yield Sql(_sql.INSERT_RUN, _sql.run_params(_scheduled_run(schedule, run_id, tick, now)))
    yield Sql(_sql.SET_SCHEDULE_LAST_RUN, (run_id, now, schedule_id))
    return Fired([run_id], [])


@wakes
def trigger_schedule(schedule_id: str, run_id: str, now: float) -> Program[RunRecord | None]:
    """Start one run of the schedule now, whatever its overlap policy; None if unknown."""
    row = yield one_row(_sql.SELECT_SCHEDULE, (schedule_id,))
    if row is None:
        return None
    run = _scheduled_run(_sql.schedule_from_row(row), run_id, now, now)
    yield Sql(_sql.INSERT_RUN, _sql.run_params(run))
    yield Sql(_sql.SET_SCHEDULE_LAST_RUN, (run_id, now, schedule_id))
    return run


def _scheduled_run(schedule: ScheduleRecord, run_id: str, tick: float, now: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow=schedule.workflow,
        status=RunStatus.PENDING,
        args=schedule.args,
        created_at=now,
        updated_at=now,
        max_recoveries=schedule.max_recoveries,
        queue=schedule.queue,
        scheduled_at=tick,
        origin="schedule",
    )


def _active_run(run_id: str | None) -> Program[str | None]:
    """The unfinished run of a chain that starts at `run_id` (following continue_as_new)."""
    for _ in range(100):
        if run_id is None:
            return None
        row = yield one_row(_sql.SELECT_RUN_CHAIN, (run_id,))
        if row is None:
            return None
        status, continued_to = row
        if status == RunStatus.CONTINUED and continued_to is not None:
            run_id = str(continued_to)
            continue
        return None if status in FINISHED else run_id
    return run_id  # a very long chain: take it as active rather than start another


# event triggers


def sync_subscriptions(
    workflows: Sequence[tuple[str, str | None, str | None, int]], now: float
) -> Program[None]:
    """Store which event type each (workflow, on, queue, max_recoveries) subscribes to.

    A workflow with `on` None loses its subscriptions; workflows not listed are untouched.
    """
    for workflow, event_type, queue, max_recoveries in workflows:
        if event_type is None:
            yield Sql(_sql.DELETE_SUBSCRIPTIONS, (workflow,))
            continue
        yield Sql(_sql.DELETE_OTHER_SUBSCRIPTIONS, (workflow, event_type))
        yield Sql(_sql.UPSERT_SUBSCRIPTION, (event_type, workflow, queue, max_recoveries, now))


def list_subscriptions() -> Program[list[Subscription]]:
    """Every stored subscription, by event type then workflow."""
    rows = yield all_rows(_sql.SELECT_SUBSCRIPTIONS)
    return [Subscription(str(t), str(w), q, int(m)) for t, w, q, m in rows]


def emit_run_id(event_type: str, key: str, workflow: str) -> str:
    """The id of the run a keyed emit starts for `workflow` (readable and injective)."""
    parts = (quote(part, safe="@.-_~+") for part in (event_type, key, workflow))
    return "emit:" + ":".join(parts)


def emit_key_of(run_id: str) -> tuple[str, str] | None:
    """The (event type, key) whose emit started `run_id` (see emit_run_id); None if none."""
    parts = run_id.split(":")  # each part is quoted: it holds no ":"
    if len(parts) != 4 or parts[0] != "emit":
        return None
    return unquote(parts[1]), unquote(parts[2])


@wakes
def emit_event(
    event_type: str,
    args: str,
    key: str | None,
    now: float,
    local: Sequence[Subscription],
    lease: Lease | None = None,
    step: StepRecord | None = None,
    trace_context: str | None = None,
) -> Program[list[str]]:
    """Start every subscriber of `event_type` with `args`; their run ids (see Store.emit)."""
    if step is not None:
        assert lease is not None
        if not (yield Sql(_sql.TOUCH_OWNED, (now, step.run_id, lease.owner, lease.fence))):
            raise LeaseLost(step.run_id)
    run_ids: list[str] | None = None
    if key is not None:
        row = yield one_row(_sql.SELECT_EMIT_KEY, (event_type, key))
        if row is not None:
            run_ids = [str(run_id) for run_id in json.loads(row[0])]
    if run_ids is None:
        rows = yield all_rows(_sql.SELECT_SUBSCRIBERS, (event_type,))
        subscribers = {str(r[1]): Subscription(str(r[0]), str(r[1]), r[2], int(r[3])) for r in rows}
        subscribers.update({s.workflow: s for s in local if s.event_type == event_type})
        run_ids = []
        for name in sorted(subscribers):
            sub = subscribers[name]
            run_id = ids.new_run_id() if key is None else emit_run_id(event_type, key, name)
            run = RunRecord(
                run_id=run_id,
                workflow=name,
                status=RunStatus.PENDING,
                args=args,
                created_at=now,
                updated_at=now,
                max_recoveries=sub.max_recoveries,
                queue=sub.queue,
                trace_context=trace_context,
                origin="trigger",
            )
            yield Sql(_sql.INSERT_RUN, _sql.run_params(run))
            run_ids.append(run_id)
        if key is not None and run_ids:
            yield Sql(_sql.INSERT_EMIT_KEY, (event_type, key, json.dumps(run_ids), now))
            # A concurrent emit of the same key may have stored its ids first: use those.
            (stored,) = yield one_row(_sql.SELECT_EMIT_KEY, (event_type, key))
            run_ids = [str(run_id) for run_id in json.loads(stored)]
    if step is not None:
        assert lease is not None
        yield from record_step(lease, replace(step, result=json.dumps(run_ids)))
    return run_ids
