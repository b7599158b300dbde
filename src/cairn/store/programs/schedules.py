"""Programs that start runs by themselves: schedule ticks and event triggers.

See `programs.base` for what a program and an operation are. A tick and the runs it
starts are one transaction, and so are an emit and the runs of its subscribers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import quote, unquote

from cairn import ids
from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs.base import (
    FINISHED,
    Program,
    Sql,
    all_rows,
    one_row,
    operation,
    wakes,
)
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


@operation
def create_schedule(schedule: ScheduleRecord) -> Program[bool]:
    """Insert a new schedule; False (nothing written) if a schedule has its id."""
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


@operation
def sync_schedule(schedule: ScheduleRecord) -> Program[ScheduleRecord]:
    """Insert a schedule declared in code, or bring the stored one up to date with it.

    Operator state (paused, last run, a buffered tick) is kept, and so is the next tick
    unless the timing (cron, every, tz) changed (then `schedule.next_tick` applies), so
    ticks missed while no engine ran are still caught up. Returns the stored schedule.
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


@operation
def get_schedule(schedule_id: str) -> Program[ScheduleRecord | None]:
    """Read: the schedule, or None when no schedule has that id."""
    rows = yield all_rows(_sql.SELECT_SCHEDULE, (schedule_id,))
    return _sql.schedule_from_row(rows[0]) if rows else None


@operation
def list_schedules() -> Program[list[ScheduleRecord]]:
    """Read: every schedule, by id."""
    rows = yield all_rows(_sql.SELECT_SCHEDULES)
    return [_sql.schedule_from_row(row) for row in rows]


@operation
def due_schedules(now: float, limit: int) -> Program[list[ScheduleRecord]]:
    """Read: up to `limit` unpaused schedules with a tick due by `now` or a buffered tick.

    Earliest next tick first.
    """
    rows = yield all_rows(_sql.SELECT_DUE_SCHEDULES, (now, limit))
    return [_sql.schedule_from_row(row) for row in rows]


@operation
def next_schedule_tick() -> Program[float | None]:
    """Read: the earliest next tick of an unpaused schedule, or None."""
    rows = yield all_rows(_sql.NEXT_SCHEDULE_TICK)
    return None if not rows or rows[0][0] is None else float(rows[0][0])


@operation
def set_schedule_paused(
    schedule_id: str, *, paused: bool, next_tick: float | None, now: float
) -> Program[ScheduleRecord | None]:
    """Pause or resume a schedule; a buffered tick is dropped.

    A non-None `next_tick` replaces the stored one. Returns the schedule after, or None
    (nothing written) if unknown.
    """
    params = (1 if paused else 0, next_tick, now, schedule_id)
    if not (yield Sql(_sql.SET_SCHEDULE_PAUSED, params)):
        return None
    return _sql.schedule_from_row((yield one_row(_sql.SELECT_SCHEDULE, (schedule_id,))))


@operation
def delete_schedule(schedule_id: str) -> Program[bool]:
    """Delete a schedule; False if unknown. Its runs are left alone."""
    return bool((yield Sql(_sql.DELETE_SCHEDULE, (schedule_id,))))


@operation
@wakes
def fire_schedule(
    schedule_id: str,
    *,
    expected_next: float,
    new_next: float,
    ticks: Sequence[tuple[float, str]],
    now: float,
) -> Program[Fired | None]:
    """Fire ticks of a schedule, once across every engine, in one transaction.

    Moves `next_tick` from `expected_next` to `new_next` (a compare-and-set: None and
    nothing written if the stored next tick differs or the schedule is paused: another
    engine fired it, or it was paused or changed), then applies the overlap policy to each
    (tick, run_id) in order against the schedule's latest run (following
    continue_as_new): `allow` starts a run, `skip` skips while that run is active,
    `buffer_one` keeps the first such tick as `buffered_tick`, `cancel_other` cancels
    that run (as `control_run`) and starts. A started run is PENDING with `scheduled_at` =
    its tick, and becomes the latest run.
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
            yield from control_run(active, "cancel", now=now)
            cancelled.append(active)
        yield Sql(_sql.INSERT_RUN, _sql.run_params(_scheduled_run(schedule, run_id, tick, now)))
        started.append(run_id)
        last = run_id
    yield Sql(_sql.SET_SCHEDULE_STATE, (buffered, last, now, schedule_id))
    return Fired(started, cancelled, skipped, buffered is not None)


@operation
@wakes
def release_buffered(
    schedule_id: str, *, tick: float, run_id: str, now: float
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


@operation
@wakes
def trigger_schedule(schedule_id: str, *, run_id: str, now: float) -> Program[RunRecord | None]:
    """Start one run of the schedule now, whatever its overlap policy.

    It becomes the latest run. None (nothing written) if unknown.
    """
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


@operation
def sync_subscriptions(
    workflows: Sequence[tuple[str, str | None, str | None, int]], *, now: float
) -> Program[None]:
    """Store what each `(workflow, event_type, queue, max_recoveries)` subscribes to.

    A workflow listed with event_type None loses its subscriptions; workflows not listed
    are left alone (other deployments may define them). Callers skip an empty list (it
    would be a transaction that writes nothing).
    """
    for workflow, event_type, queue, max_recoveries in workflows:
        if event_type is None:
            yield Sql(_sql.DELETE_SUBSCRIPTIONS, (workflow,))
            continue
        yield Sql(_sql.DELETE_OTHER_SUBSCRIPTIONS, (workflow, event_type))
        yield Sql(_sql.UPSERT_SUBSCRIPTION, (event_type, workflow, queue, max_recoveries, now))


@operation
def list_subscriptions() -> Program[list[Subscription]]:
    """Read: every stored subscription, by event type then workflow."""
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


@operation
@wakes
def emit_event(
    event_type: str,
    args: str,
    *,
    key: str | None,
    now: float,
    local: Sequence[Subscription] = (),
    lease: Lease | None = None,
    step: StepRecord | None = None,
    trace_context: str | None = None,
) -> Program[list[str]]:
    """Start one PENDING run (with `args`) per subscriber of `event_type`; their ids.

    Subscribers are the stored subscriptions plus `local` ones (which win for the same
    workflow). With a `key`, a (event_type, key) already emitted returns the ids stored
    then and starts nothing; a new one stores its ids when it started any run (run ids
    `emit_run_id(...)`). With `step`, the emit is part of the run held by `lease`:
    LeaseLost (nothing written) if not held, else `step` is journaled with the ids as its
    result, in the same transaction. The runs keep `trace_context` (the emitter's trace,
    see observability/propagation.py).
    """
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
