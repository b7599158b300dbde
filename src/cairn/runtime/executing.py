"""The attempts a worker executes: its slots, each attempt's task, and hand-backs.

One of the parts a Worker (runtime/worker.py) holds, and the one the others are made
with: a Claimer (runtime/claiming.py) fills its slots, a Reconciler
(runtime/reconciling.py) checks them against each heartbeat. It knows neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from cairn.core import common_runs, executor
from cairn.core.futile_wakes import FutileWakes
from cairn.core.live_run import LiveRun
from cairn.core.run_env import RunEnv
from cairn.core.tenure import Tenure
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime import keyless, leases
from cairn.runtime.heartbeat import Heartbeat
from cairn.runtime.in_flight import InFlight
from cairn.runtime.local_executor import Reservation
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Lease, RunRecord, WorkerRecord

log = logcontext.logger("cairn.worker")

Finished = Callable[[str, executor.Outcome], None]


@dataclass(eq=False, slots=True)
class Attempt:
    """One attempt executing in this process."""

    run: RunRecord
    epoch: int
    task: asyncio.Task[None] | None = None
    live: LiveRun | None = None  # once the executor has made it
    started: float = 0.0  # time.monotonic() when it was launched
    ended: str | None = None  # the status it left the run in (None: handed back)

    async def quiesced(self, timeout: float | None = None) -> bool:
        """Wait until no thread of this attempt runs a step (see LiveAttempt.quiesced)."""
        return True if self.live is None else await self.live.attempt.quiesced(timeout)


class Executions:
    """Executes runs in this process, one attempt per run, within `concurrency` slots."""

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
        self.env = env
        # The step queues this process serves (its StepWorker's), published in its row.
        self.step_queues = list(step_queues or ())
        # False: claim a run only when told its id (`take`: a transport's message, see
        # cairn.celery), never by polling the database for work.
        self.polls = polls
        self.queues = queues
        # True: the engine of transient runs, which executes transient workflows too. A
        # worker on a database never does: their runs are never stored there.
        self.transient = transient
        # False: execute only runs started in this process (`cairn run`), never claim others.
        self.claim = claim
        self.concurrency = concurrency
        self.lease = lease
        self.poll_interval = poll_interval
        self.on_finished = on_finished  # told of each run that stops executing here
        self.active: dict[str, Attempt] = {}
        # The live state of executing runs, for cancel/pause requests to reach them.
        self.live: dict[str, LiveRun] = {}
        # The step attempts in flight, as each heartbeat publishes them.
        self.in_flight = InFlight(self.live)
        self.tenure = Tenure(lease)
        env.tenure = self.tenure
        env.on_new_work = self.wake
        if env.futile is None:
            env.futile = FutileWakes()
        self.process = leases.this_process()
        self.woken = asyncio.Event()  # set when there may be work to claim now
        # Called when an attempt ends or a reserved slot is given back (the Claimer's).
        self.on_slot_freed: Callable[[], None] = _nothing
        # Called once as the worker starts stopping (the Claimer's: takes in line leave).
        self.on_stopping: Callable[[], None] = _nothing
        self.releases: set[asyncio.Task[None]] = set()  # hand-backs in flight
        self.releasing: set[str] = set()  # runs being handed back: not to be resumed
        # Runs handed back for a key this worker lacks: left out of its claims a while.
        self.keyless = keyless.KeylessRuns()
        self.stopping = False  # True once stopping (or halted): nothing more is claimed
        self._halted = False  # as good as killed: nothing more is written
        # Why this worker stopped by itself (its database can never be written), or None.
        self.failure: str | None = None
        self.failed = asyncio.Event()  # set with `failure`
        self.grace_ends: float | None = None  # time.monotonic(), while stopping
        self._reserved = 0
        self.backlog = False  # the last claim may have left claimable runs behind
        self.started = time.monotonic()  # when the worker registered (monotonic)
        # The worker's heartbeat, once Worker.start has begun it: ceased on failure.
        self.heartbeat: Heartbeat | None = None

    @property
    def free(self) -> int:
        """Slots left for new runs."""
        return self.concurrency - len(self.active) - self._reserved

    def record(self) -> WorkerRecord:
        """This worker's row (its times are written by the database)."""
        return WorkerRecord(
            worker_id=self.env.owner,
            host=leases.HOST,
            pid=os.getpid(),
            started_at=0.0,
            heartbeat_at=0.0,
            concurrency=self.concurrency,
            queues=leases.queues_column(self.queues, self.step_queues),
            # What it takes from the queue: a run of any other workflow is reported as
            # one no worker can execute (nothing, for an engine that never claims).
            workflows=json.dumps(self.executes() if self.claim else []),
            lease=self.lease,
            process=None if self.process is None else str(self.process),
            executing=self.in_flight.snapshot(),
            versions=json.dumps(self.versions() if self.claim else {}),
        )

    def versions(self) -> dict[str, str]:
        """The version of each workflow it claims that declares one (rolling deploys)."""
        workflows = self.env.registry.workflows
        return {
            name: version
            for name in self.executes()
            if (version := workflows[name].version) is not None
        }

    def executes(self) -> list[str]:
        """The workflows whose runs it claims, by name."""
        return sorted(
            name
            for name, workflow in self.env.registry.workflows.items()
            if workflow.durable or self.transient
        )

    def writable(self) -> bool:
        """False once the store can never write again; the worker then stops by itself.

        It claims nothing more, ends its attempts (none of their writes could land) and
        stops heartbeating, so that other workers take its runs over once its lease has
        run out; `failed` is set for whoever runs it (`cairn worker` exits with status 1).
        """
        reason = self.env.store.health.unwritable
        if reason is None:
            return True
        if self.failure is None:
            self.failure = reason
            self.stop_claiming()
            log.error(
                "%s: this worker stops. It claims nothing more and stops heartbeating; "
                "other workers take its runs over once its lease has run out",
                reason,
            )
            if self.heartbeat is not None:
                self.heartbeat.cease()
            for attempt in self.active.values():
                if attempt.task is not None:
                    attempt.task.cancel()
            self.failed.set()
        return False

    def halt(self) -> None:
        """From now on, act like a killed process: no hand-backs, claims or resumes."""
        self.stop_claiming()
        self._halted = True

    def stop_claiming(self) -> None:
        """Claim nothing more from now on (`stopping`), and say so once (`on_stopping`)."""
        if not self.stopping:
            self.stopping = True
            self.on_stopping()

    def wake(self) -> None:
        """Look for work now rather than at the next poll."""
        self.woken.set()

    def reserve(self) -> Reservation | None:
        """Hold a slot for a run started in this process; None when full or stopping."""
        if self.stopping or self.concurrency - len(self.active) - self._reserved <= 0:  # free
            return None
        self._reserved += 1
        return Reservation(self.env.owner, self.tenure.epoch)

    def release(self, reservation: Reservation) -> None:
        """Give back a reserved slot."""
        self._reserved -= 1
        self.woken.set()
        self.on_slot_freed()

    def launch(self, run: RunRecord, reservation: Reservation) -> None:
        """Execute a run stored with a slot from `reserve`."""
        self._reserved -= 1
        self.start(run, fresh=True, epoch=reservation.epoch)

    def start(self, run: RunRecord, *, fresh: bool, epoch: int) -> None:
        """Execute an attempt of `run`; after the run's previous attempt here has ended.

        Two attempts of one run never execute at once in one process: a claim that hands
        back a run whose older attempt is still here (this worker was frozen past its
        lease, the run was taken over and came back) cancels the old one and waits until
        it has ended, its sync step threads included. The old one is fenced anyway.
        """
        previous = self.active.get(run.run_id)
        if previous is not None and previous.run.fence >= run.fence:
            return  # the same claim, seen twice (a late reply, and the reconciler)
        if log.isEnabledFor(logging.INFO):  # its `extra` is built only then
            log.info(
                "run %s (%s) started, attempt %d",
                run.run_id,
                run.workflow,
                run.attempt,
                extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
            )
        attempt = Attempt(run, epoch, started=time.monotonic())
        # The loop's own create_task names the task as it makes it (asyncio.create_task
        # calls it, then names the task in a second, Python-level call).
        attempt.task = asyncio.get_running_loop().create_task(
            self._execute(attempt, previous, fresh), name=f"cairn-run-{run.run_id}"
        )
        self.active[run.run_id] = attempt

    async def _execute(self, attempt: Attempt, previous: Attempt | None, fresh: bool) -> None:
        run = attempt.run
        if previous is not None:
            log.warning("run %s: an older attempt still executes here; ending it first", run.run_id)
            if previous.task is not None:
                previous.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await previous.task
            await previous.quiesced()

        def on_live(live: LiveRun) -> None:
            attempt.live = live
            self.live[run.run_id] = live
            if self.stopping:  # launched as its worker stops: it leaves at once
                live.interrupts.hand_back()

        outcome = _ABANDONED
        try:
            outcome = await common_runs.execute(
                self.env, run, fresh=fresh, on_live=on_live, epoch=attempt.epoch
            )
        except Exception:
            log.exception("run %s: unexpected engine error; handing it back", run.run_id)
        finally:
            attempt.ended = outcome.status
            if self.active.get(run.run_id) is attempt:
                del self.active[run.run_id]
                self.on_slot_freed()
            if attempt.live is not None and self.live.get(run.run_id) is attempt.live:
                del self.live[run.run_id]
            # A freed slot matters only if work may be waiting for one: the last claim
            # filled every slot it asked for, or this run's queue had runs held back. A run
            # that just parked may itself be due already (a message or a cancel arrived as
            # it parked), so look then too.
            parked = outcome.status in (RunStatus.SLEEPING, RunStatus.WAITING, RunStatus.PAUSED)
            if outcome.status is not None and not parked and self.env.futile is not None:
                self.env.futile.forget(run.run_id)  # it finished
            if outcome.lacking is not None:
                what = f"run {run.run_id} ({run.workflow})"
                now = self.env.clock.now()
                self.keyless.handed_back(run.run_id, outcome.lacking, now, what=what, run=run)
            elif outcome.status is not None:
                self.keyless.forget(run.run_id)
            if not self.stopping and (self.backlog or parked or run.queue is not None):
                self.woken.set()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "run %s %s",
                run.run_id,
                outcome.status or "handed back",
                extra=logcontext.extra(run.run_id, run.workflow, run.attempt),
            )
        if outcome.status is None and not self._halted and self.writable():
            lacking = outcome.lacking
            waiting_for = None if lacking is None else keyless.waiting_for(lacking)
            self._hand_back(attempt, waiting_for, uncount=outcome.idle)
        self.on_finished(run.run_id, outcome)

    def lease_of(self, attempt: Attempt) -> Lease:
        """The lease `attempt` holds its run under."""
        return Lease(self.env.owner, attempt.run.fence)

    def _hand_back(
        self, attempt: Attempt, waiting_for: str | None = None, *, uncount: bool = False
    ) -> None:
        # An attempt that ended early while this worker lives (the store failed, its
        # outcome was unknown) would keep its run RUNNING under a heartbeating owner
        # forever: queue it again, retrying until the database answers. Fenced: if the
        # run was taken over or has ended, this matches nothing.
        run_id = attempt.run.run_id
        self.releasing.add(run_id)
        task = asyncio.create_task(
            self._release(attempt, waiting_for, uncount), name=f"cairn-hand-back-{run_id}"
        )
        self.releases.add(task)
        task.add_done_callback(self.releases.discard)

    async def _release(self, attempt: Attempt, waiting_for: str | None, uncount: bool) -> None:
        run_id = attempt.run.run_id
        try:
            # Not while a step of it still runs in a thread; when stopping, only while
            # the grace lasts (then the thread is left behind, see `stop`).
            ends = self.grace_ends
            await attempt.quiesced(None if ends is None else max(0.0, ends - time.monotonic()))
            delay = 0.05
            while self.writable():
                try:
                    await self.env.store.write(
                        worker_ops.release_run(
                            run_id,
                            self.lease_of(attempt),
                            waiting_for=waiting_for,
                            uncount=uncount,
                            now=self.env.clock.now(),
                        )
                    )
                    break
                except Exception as exc:
                    if not self.writable():
                        break
                    log.warning("run %s: cannot hand it back yet (%s); retrying", run_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        finally:
            self.releasing.discard(run_id)
        self.woken.set()

    def running(self, task: asyncio.Task[object]) -> str | None:
        """What `task` runs, for the watchdog (from its thread, while the loop is stuck)."""
        try:
            lives = list(self.live.values())
        except RuntimeError:  # changed while we looked: the loop is moving again
            return None
        for live in lives:
            key = live.attempt.step_of(task)
            if key is not None:
                return f"step {key!r} of run {live.run.run_id} ({live.run.workflow})"
        return None

    def executing(self, run_id: str) -> bool:
        """True while `run_id` executes in this worker."""
        return run_id in self.active

    def deliver(self, run_id: str, control: str | None) -> None:
        """Pass an operator request to a run executing here (no-op if it is not)."""
        live = self.live.get(run_id)
        if live is not None:
            live.interrupts.request(control)


def _nothing() -> None:
    pass


_ABANDONED = executor.Outcome(None)  # frozen: one for every attempt that raised
