"""The scheduler: fires each schedule tick exactly once, from inside engines with workers.

Every such engine runs this loop; no extra process is needed. A tick is fired by
advancing the schedule's next tick with a compare-and-set, so whichever engine gets there
first fires it and the others find nothing to do. Its run id is derived from the schedule
and the tick time, so even a repeated insert cannot start a second run. A schedule
declared in code whose large arguments the blob store does not take at start-up is
declared again at each pass until it does, its first tick still the one after start-up.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from cairn import cancelling
from cairn.errors import StoreUnavailable
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime.control_view import ControlView
from cairn.runtime.schedules import ScheduleControl, spec_of
from cairn.store.programs import runs as run_ops
from cairn.store.programs import schedules
from cairn.store.records import Fired, ScheduleRecord

if TYPE_CHECKING:
    from cairn.authoring.schedule_ticks import ScheduleDef
    from cairn.observability.hooks import Observer

log = logcontext.logger("cairn.scheduler")

# Schedules looked at per query; more are picked up by the next query of the same pass.
BATCH = 100
# A run in one of these may have ended its chain (CONTINUED is checked by the store).
_ENDED = frozenset(status.value for status in RunStatus if status.finished)
# Queries per pass at most, so a huge backlog cannot starve the event loop.
MAX_ROUNDS = 50


class Scheduling(ControlView, Protocol):
    """What the scheduler uses of RunControl: its ControlView and its schedules."""

    schedules: ScheduleControl


class Scheduler:
    """Fires due ticks of the schedules in the database, with their overlap policies."""

    def __init__(
        self, control: Scheduling, *, poll_interval: float, observer: Observer | None = None
    ) -> None:
        self.control = control
        self.observer = observer  # told how late each tick fired (metrics)
        # How often to look for schedules changed by other processes (and buffered ticks
        # whose blocking run ended); due ticks themselves are waited for precisely.
        self.poll_interval = poll_interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._buffered = False  # the last pass saw a tick held back by its running run
        # schedule id -> the run whose held-back ticks were logged (see _log_held)
        self._held: dict[str, str | None] = {}
        # Declared in code, not stored yet: the blob store did not take their arguments.
        self._unstored: list[ScheduleDef] = []
        self._declared_at = 0.0  # when the engine declared them: their first tick follows

    async def declare(self) -> None:
        """Store the schedules declared in code (see `ScheduleControl.declare`).

        One whose large arguments the blob store does not take (full, unwritable, away)
        does not stop the engine: it is declared again at each pass of the loop until the
        store takes them (`_declare_again`), its first tick the one after now, so that no
        tick due meanwhile is lost (those inside its catchup run once each).
        """
        self._declared_at = self.control.clock.now()
        refused = await self.control.schedules.declare(
            self.control.registry.schedules.values(), now=self._declared_at
        )
        for defn, exc in refused:
            log.warning(
                "schedule %r: not stored yet: %s; declared again until the blob store takes "
                "its arguments",
                defn.id,
                str(exc).replace("\n", " "),
            )
        self._unstored = [defn for defn, _ in refused]

    async def _declare_again(self) -> None:
        """Store the schedules `declare` could not; those the blob store takes now are said."""
        before = {defn.id for defn in self._unstored}
        refused = await self.control.schedules.declare(self._unstored, now=self._declared_at)
        self._unstored = [defn for defn, _ in refused]
        for stored in sorted(before - {defn.id for defn in self._unstored}):
            log.info("schedule %r: stored, the blob store took its arguments", stored)

    def start(self) -> None:
        """Start the loop; its first pass fires whatever is due now."""
        self.control.schedules.on_change = self.wake
        self._task = asyncio.create_task(self._loop(), name="cairn-scheduler")

    async def stop(self) -> None:
        """Stop the loop (a pass in progress is abandoned; its transaction is atomic)."""
        self.control.schedules.on_change = None
        # The flag ends the loop even if a database driver swallowed the cancellation.
        self._stopping = True
        if self._task is not None:
            await cancelling.stop([self._task])  # a pass waiting on a silent database too
            self._task = None

    def wake(self) -> None:
        """Look at the schedules now (one was created, resumed or changed here)."""
        self._wake.set()

    async def run_due(self) -> list[str]:
        """Fire every tick due now that no other engine fired; the run ids this started."""
        store = self.control.store
        started: list[str] = []
        for _ in range(MAX_ROUNDS):
            now = self.control.clock.now()
            due = await store.read(schedules.due_schedules(now, BATCH))
            more = False
            fired_any = False
            self._buffered = any(record.buffered_tick is not None for record in due)
            for record in due:
                try:
                    fired, behind = await self._fire(record, now)
                except Exception:
                    # One broken schedule (say, a time zone this machine lacks) must not
                    # stop the others.
                    log.exception("schedule %r: firing failed", record.schedule_id)
                    continue
                more = more or behind
                fired_any = fired_any or bool(fired)
                started.extend(self._started(fired))
            # Again while a backlog remains (or a full batch made progress).
            if not (more or (fired_any and len(due) == BATCH)):
                break
        return started

    async def _fire(self, record: ScheduleRecord, now: float) -> tuple[list[Fired], bool]:
        """Fire `record`'s buffered and due ticks; True if ticks are still due after."""
        store = self.control.store
        spec = spec_of(record)
        outcomes: list[Fired] = []
        if record.buffered_tick is not None and await self._may_release(record):
            tick = record.buffered_tick
            released = await store.write(
                schedules.release_buffered(
                    record.schedule_id, tick=tick, run_id=spec.run_id(tick), now=now
                )
            )
            if released is not None:
                outcomes.append(released)
        if record.next_tick is None or record.next_tick > now:
            return outcomes, False
        ticks, new_next = spec.due(record.next_tick, now)
        fired = await store.write(
            schedules.fire_schedule(
                record.schedule_id,
                expected_next=record.next_tick,
                new_next=new_next,
                ticks=[(tick, spec.run_id(tick)) for tick in ticks],
                now=now,
            )
        )
        if fired is None:
            return outcomes, False  # another engine fired it first
        if self.observer is not None:
            for tick in ticks:
                self.observer.fired(record.workflow, max(0.0, now - tick))
        if fired.skipped or fired.buffered:
            self._log_held(record, fired)
        outcomes.append(fired)
        return outcomes, new_next <= now

    def _log_held(self, record: ScheduleRecord, fired: Fired) -> None:
        """Say that ticks were held back by the schedule's active run: once per such run.

        A run that outlasts many ticks (a slow poller, `every="1s"`) would otherwise make
        a line per tick. A burst of caught-up ticks that started runs is said as it is.
        """
        if fired.started:
            self._held.pop(record.schedule_id, None)
            log.info(
                "schedule %r: %d tick(s) started, %d skipped%s",
                record.schedule_id,
                len(fired.started),
                fired.skipped,
                ", one buffered" if fired.buffered else "",
            )
            return
        if self._held.get(record.schedule_id) == record.last_run_id:
            return
        self._held[record.schedule_id] = record.last_run_id
        log.info(
            "schedule %r: run %s is still active, so its ticks are held back (overlap %r: %s); "
            "said once per run",
            record.schedule_id,
            record.last_run_id,
            record.overlap,
            "the first waits for it to end, the others are skipped"
            if record.overlap == "buffer_one"
            else "they are skipped",
        )

    async def _may_release(self, record: ScheduleRecord) -> bool:
        """False while the run holding back a buffered tick is certainly active.

        A cheap read that spares a write transaction on every poll.
        """
        if record.last_run_id is None:
            return True
        run = await self.control.store.read(run_ops.get_run(record.last_run_id))
        return run is None or run.status in _ENDED

    def _started(self, outcomes: list[Fired]) -> list[str]:
        started: list[str] = []
        local = self.control.local
        for fired in outcomes:
            for run_id in fired.cancelled:
                log.info("run %s cancelled by its schedule (cancel_other)", run_id)
                if local is not None:
                    local.deliver(run_id, "cancel")
            started.extend(fired.started)
        if started or any(fired.cancelled for fired in outcomes):
            self.control.wake_local()
        return started

    async def _loop(self) -> None:
        # An idle pass costs one read (the next tick): the due schedules are read only when
        # a tick is due, a change was made here, or a held-back tick may be released.
        look = True  # the first pass fires whatever is due now
        while not self._stopping:
            next_tick = None
            store = self.control.store
            try:
                if self._unstored:
                    await self._declare_again()
                if not look:
                    next_tick = await store.read(schedules.next_schedule_tick())
                    look = self._buffered or (
                        next_tick is not None and next_tick <= self.control.clock.now()
                    )
                if look:
                    await self.run_due()
                    next_tick = await store.read(schedules.next_schedule_tick())
            except StoreUnavailable as exc:  # the database is away: one line, no traceback
                log.warning("scheduling failed (%s); retrying", exc)
            except Exception:
                log.exception("scheduling failed; retrying")
            look = await self._wait(next_tick)

    async def _wait(self, next_tick: float | None) -> bool:
        """Until `next_tick` by the engine's clock, a wake-up, or the poll interval.

        True unless only the poll interval passed (then nothing here says a tick is due).
        """
        clock = self.control.clock
        woken = asyncio.ensure_future(self._wake.wait())
        waiters: list[asyncio.Future[Any]] = [woken]
        if next_tick is not None:
            waiters.append(asyncio.ensure_future(clock.sleep(max(0.0, next_tick - clock.now()))))
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=self.poll_interval, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        self._wake.clear()
        return bool(done)
