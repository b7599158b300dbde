"""The claim -> execute -> release loop: bounded concurrency, one attempt per run.

Liveness lives beside it: heartbeats on their own thread (`heartbeat.py`), a watchdog
for a blocked event loop (`watchdog.py`), and a reconciler that compares, at every
heartbeat, the runs the database says this worker holds with the attempts it executes.

runtime/worker.py (Worker: start, stop and its grace, abandon) is the hub; it holds one
object per concern, each made here with what it uses: Executions (runtime/executing.py:
slots, attempts, hand-backs), a Claimer (runtime/claiming.py: claims, the claim loop,
operator requests) and a Reconciler (runtime/reconciling.py: what each heartbeat saw,
stalled runs let go, lost claims resumed, dead neighbours). Their methods that others
call are the Worker's, bound by name in `__init__`. None of them imports the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable
from typing import Any, TypeVar

from cairn import cancelling
from cairn.authoring import schedule_ticks
from cairn.core.run_env import RunEnv
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.runtime import in_flight
from cairn.runtime.claiming import Claimer
from cairn.runtime.executing import Attempt, Executions, Finished
from cairn.runtime.heartbeat import Heartbeat
from cairn.runtime.reconciling import Reconciler
from cairn.runtime.watchdog import LoopWatchdog
from cairn.store.programs import workers
from cairn.store.records import AttemptRecord

log = logcontext.logger("cairn.worker")
T = TypeVar("T")

# Seconds the database work of a stop (hand-backs, removing the worker row) may take
# after the grace: the docs ask for a grace 5 s shorter than the wait before SIGKILL.
HAND_BACK = 3.0
# The same after a second signal (`hurry`).
HURRIED = 1.0


class Worker:
    """Executes runs in this process: those started here and those it claims."""

    def __init__(
        self,
        env: RunEnv,
        *,
        concurrency: int,
        lease: float,
        on_finished: Finished,
        poll_interval: float = 0.5,
        claim: bool = True,
        queues: list[str] | None = None,
        transient: bool = False,
        polls: bool = True,
        step_queues: list[str] | None = None,
    ) -> None:
        executions = self.executions = Executions(
            env,
            concurrency=concurrency,
            lease=lease,
            on_finished=on_finished,
            poll_interval=poll_interval,
            claim=claim,
            queues=queues,
            transient=transient,
            polls=polls,
            step_queues=step_queues,
        )
        self.claimer = Claimer(executions)
        self.reconciler = Reconciler(executions, self.claimer)
        self.env = env
        self.lease = lease
        self.tenure = executions.tenure
        self.active = executions.active  # run id -> its attempt executing here
        self.in_flight = executions.in_flight
        # The surface the engine, RunControl (as its LocalExecutor), the CLI, cairn.celery
        # and tests call, each from its one owner.
        self.record = executions.record
        self.executes = executions.executes
        self.writable = executions.writable
        self.halt = executions.halt
        self.wake = executions.wake
        self.reserve = executions.reserve
        self.release = executions.release
        self.launch = executions.launch
        self.executing = executions.executing
        self.deliver = executions.deliver
        self.claim_once = self.claimer.claim_once
        self.take = self.claimer.take
        self.judges_heartbeats = self.claimer.judges_heartbeats
        self._tasks: list[asyncio.Task[None]] = []
        self._hurry = asyncio.Event()  # the grace of a stop ends now
        self._hand_back_ends = float("inf")  # time.monotonic() (see `stop`)
        self._heartbeat: Heartbeat | None = None
        self._watchdog: LoopWatchdog | None = None

    @property
    def free(self) -> int:
        """Slots left for new runs."""
        return self.executions.free

    @property
    def stopping(self) -> bool:
        """True once `stop` (or `halt`) was called: this worker claims nothing more."""
        return self.executions.stopping

    @property
    def failure(self) -> str | None:
        """Why this worker stopped by itself (its database can never be written), or None."""
        return self.executions.failure

    @property
    def failed(self) -> asyncio.Event:
        """Set with `failure`."""
        return self.executions.failed

    async def start(self) -> None:
        """Register, recover what dead neighbours left, and start the loops."""
        sent_at = time.monotonic()
        await self.env.store.write(workers.register_worker(self.record()))
        self.tenure.renewed(sent_at)  # registering proves this worker alive, like a beat
        self.executions.started = time.monotonic()
        await self.reconciler.expire_dead_neighbours(
            await self.env.store.read(workers.list_workers())
        )
        loop = asyncio.get_running_loop()
        self._heartbeat = Heartbeat(
            self.env.store,
            self.record,
            self.tenure,
            interval=self.lease / 3,
            on_beat=self.reconciler.on_beat,
            loop=loop,
            let_go=self.reconciler.stalled,
        )
        self.executions.heartbeat = self._heartbeat
        self._heartbeat.start()
        watch = self.in_flight.watch(self._heartbeat.beat_now)
        self._tasks.append(asyncio.create_task(watch, name="cairn-in-flight"))
        self._watchdog = LoopWatchdog(loop, limit=self.lease / 3, describe=self.executions.running)
        self._watchdog.start()
        # A blocked loop is not a stalled database: age waits only while the loop answers.
        self.env.store.health.watch_loop(self._watchdog.responsive_since)
        if self.executions.claim and self.executions.polls:
            await self.claim_once()
            claims = self.claimer.claim_loop()
            self._tasks.append(asyncio.create_task(claims, name="cairn-claim"))
        else:
            # No claim loop to carry them: requests from other processes (`cairn runs
            # pause|cancel`) still have to reach the runs this engine executes.
            controls = self.claimer.control_loop()
            self._tasks.append(asyncio.create_task(controls, name="cairn-control"))

    async def stop(self, *, grace: float = 0.0) -> None:
        """Stop claiming; let steps in flight finish for up to `grace` seconds; hand back.

        Each attempt is asked to leave at its next durable point: a step executing now
        finishes and commits, and the run is handed back (PENDING, no owner) at once, for
        any worker to take without waiting for a lease. An attempt still inside a step
        when the grace ends (or at once, after `hurry`) is cut off: its run is handed back
        all the same, and that step runs again wherever the run goes next. A sync step's
        thread cannot be stopped: it runs on in this process until it returns (`cairn
        worker` exits instead), its result unrecorded.

        The database work of stopping (hand-backs, the worker row) gets HAND_BACK seconds
        after the grace, HURRIED after `hurry`: a database that does not answer then
        leaves the runs to be taken over after the lease, as after a crash.
        """
        self.executions.stop_claiming()
        self.executions.grace_ends = time.monotonic() + grace
        # Before anything is awaited: a step that finished while the loops below wind
        # down would otherwise go on to start the next one, during the grace.
        self._ask_to_leave()
        await cancelling.stop([*self._tasks, *self.reconciler.tasks])
        attempts = self._ask_to_leave()  # again: a claim answered meanwhile launched one
        cut: list[Attempt] = []
        if attempts:
            if grace > 0:
                log.info(
                    "stopping: %d run(s) in flight; their steps may finish for up to %s, "
                    "then each run is handed back",
                    len(attempts),
                    schedule_ticks.describe_seconds(grace),
                )
            await self._within_grace({a.task for a in attempts if a.task is not None})
        self._hand_back_ends = time.monotonic() + (HURRIED if self._hurry.is_set() else HAND_BACK)
        if attempts:
            cut = [a for a in attempts if a.task is not None and not a.task.done()]
            steps = {a.run.run_id: a.live.attempt.running_step() if a.live else None for a in cut}
            # The step attempts cut short, recorded as interrupted with the hand-back (read
            # before the cancel below drops them).
            now = self.env.clock.now()
            interrupted = {
                a.run.run_id: in_flight.cut_short(a.live, worker=self.env.owner, now=now)
                for a in cut
            }
            await cancelling.stop([a.task for a in cut if a.task is not None])
            await asyncio.gather(
                *(
                    self._cut_off(
                        a, steps[a.run.run_id], interrupted[a.run.run_id], expected=grace <= 0
                    )
                    for a in cut
                )
            )
        releases = self.executions.releases
        await self._within_hand_back(set[asyncio.Future[Any]](releases))
        # The database is away: the worker's removal below tries again.
        await cancelling.stop(list(releases))
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._heartbeat is not None:
            await self._heartbeat.stop(within=max(0.0, self._hand_back_ends - time.monotonic()))
        if self.failure is not None:
            return  # nothing can be written: its runs go to others when its lease runs out
        # Also hands back whatever a hand-back above could not (owner cleared, PENDING).
        removal = self.env.store.write(workers.remove_worker(self.env.owner))
        try:
            await self._hand_back(removal)
        except (TimeoutError, StoreError) as exc:
            # Said only now: a hand-back above may have failed too, and this one did.
            log.warning(
                "stopped without handing its runs back (%s): those not handed back already "
                "are taken over once this worker's lease has run out",
                exc or "the database did not answer in time",
            )
            return
        if attempts:
            log.info("stopped: %s", _stopped(attempts, len(cut)))

    def _ask_to_leave(self) -> list[Attempt]:
        """Ask each attempt executing here to leave at its next durable point; them."""
        attempts = list(self.active.values())
        for attempt in attempts:
            if attempt.live is not None:
                attempt.live.interrupts.hand_back()
            elif attempt.task is not None:
                attempt.task.cancel()  # still loading its journal: nothing to finish
        return attempts

    def hurry(self) -> None:
        """End the grace of a `stop` in progress now: cut off the steps still executing.

        What is left of the hand-back window shrinks to HURRIED seconds.
        """
        self._hurry.set()
        self._hand_back_ends = min(self._hand_back_ends, time.monotonic() + HURRIED)

    async def _within_hand_back(self, tasks: set[asyncio.Future[Any]]) -> None:
        """Wait until `tasks` are done or the hand-back window ends (see `stop`)."""
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
            while pending and (left := self._hand_back_ends - time.monotonic()) > 0:
                waiting = pending if hurry.done() else pending | {hurry}
                _, pending = await asyncio.wait(
                    waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurry)
        finally:
            hurry.cancel()

    async def _hand_back(self, work: Awaitable[T]) -> T:
        """`work`, stopped at the end of the hand-back window (TimeoutError then)."""
        task = asyncio.ensure_future(work)
        try:
            await self._within_hand_back({task})
        finally:
            if not task.done():
                await cancelling.stop([task])
        if task.cancelled():
            raise TimeoutError("the database did not answer in time")
        return task.result()

    async def _within_grace(self, tasks: set[asyncio.Task[None]], at_least: float = 0.0) -> None:
        """Wait until `tasks` are done, the grace ends or `hurry` is called."""
        loop = asyncio.get_running_loop()
        grace_ends = self.executions.grace_ends
        ends = grace_ends if grace_ends is not None else time.monotonic()
        deadline = loop.time() + max(at_least, ends - time.monotonic())
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
            while pending and not self._hurry.is_set() and (left := deadline - loop.time()) > 0:
                _, pending = await asyncio.wait(
                    pending | {hurry}, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurry)
        finally:
            hurry.cancel()

    async def _cut_off(
        self,
        attempt: Attempt,
        step: str | None,
        interrupted: list[AttemptRecord],
        *,
        expected: bool,
    ) -> None:
        """Hand back the run of an attempt cut off (in `step`), trying once (see `stop`).

        `interrupted` are the step attempts it cut short, recorded with the hand-back.

        `expected`: there was no grace (a script or a test closing its engine), so being cut
        off is the plan, not news.
        """
        run = attempt.run
        threads = attempt.live is not None and not await attempt.quiesced(0)
        log.log(
            logging.INFO if expected and not threads else logging.WARNING,
            "run %s: %s cut off %s%s; handed back, the step runs again wherever the run goes next",
            run.run_id,
            f"step {step!r}" if step else "its attempt",
            "(stopping at once)" if self._hurry.is_set() else "by the end of the grace",
            " (its sync thread cannot be stopped and runs on, unrecorded)" if threads else "",
            extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
        )
        if self.failure is None:
            release = workers.release_run(
                run.run_id, self.executions.lease_of(attempt), interrupted=interrupted
            )
            with contextlib.suppress(Exception):
                await self._hand_back(self.env.store.write(release))

    async def abandon(self) -> None:
        """Stop without a word to the database, like a killed process (for testing)."""
        self.halt()
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        tasks = [*self._tasks, *self.reconciler.tasks, *self.executions.releases]
        tasks += [a.task for a in self.active.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _stopped(attempts: list[Attempt], cut: int) -> str:
    """What became of the runs in flight when the worker stopped (its last log line)."""
    ended = Counter(a.ended for a in attempts if a.ended is not None)
    back = len(attempts) - sum(ended.values())
    said = ", ".join(f"{status} {count}" for status, count in sorted(ended.items()))
    if not back:
        return f"the {len(attempts)} run(s) in flight ended here ({said}); none handed back"
    text = f"{back} run(s) in flight handed back, {cut} of them cut off mid-step "
    text += "(those steps run again elsewhere)"
    return f"{text}; {sum(ended.values())} more ended here ({said})" if ended else text
