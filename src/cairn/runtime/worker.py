"""The claim -> execute -> release loop, with bounded concurrency and heartbeats."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable

from cairn.core import executor
from cairn.core.live_run import LiveRun, RunEnv
from cairn.runtime import leases
from cairn.store.records import RunRecord, WorkerRecord

log = logging.getLogger("cairn.worker")

Finished = Callable[[str, executor.Outcome], None]


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
    ) -> None:
        self.env = env
        self.queues = queues
        # False: execute only runs started in this process (`cairn run`), never claim others.
        self.claim = claim
        self.concurrency = concurrency
        self.lease = lease
        self.poll_interval = poll_interval
        self._on_finished = on_finished
        self.active: dict[str, asyncio.Task[None]] = {}
        # The live state of executing runs, for cancel/pause requests to reach them.
        self.live: dict[str, LiveRun] = {}
        env.on_new_work = self.wake
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._handing_back: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._reserved = 0
        self._backlog = False  # the last claim may have left claimable runs behind

    @property
    def free(self) -> int:
        """Slots left for new runs."""
        return self.concurrency - len(self.active) - self._reserved

    async def start(self) -> None:
        """Register, recover what dead local workers left, and start the loops."""
        now = self.env.clock.now()
        await self.env.store.register_worker(
            WorkerRecord(
                worker_id=self.env.owner,
                host=leases.HOST,
                pid=os.getpid(),
                # Real time, not the engine's clock: process liveness is checked against it.
                started_at=time.time(),
                heartbeat_at=now,
                concurrency=self.concurrency,
                # What it takes from the queue: a run of any other workflow is reported
                # as one no worker can execute (nothing, for an engine that never claims).
                workflows=json.dumps(sorted(self.env.registry.workflows) if self.claim else []),
            )
        )
        await self._expire_dead_neighbours()
        self._tasks = [asyncio.create_task(self._heartbeat_loop(), name="cairn-heartbeat")]
        if self.claim:
            await self.claim_once()
            self._tasks.append(asyncio.create_task(self._claim_loop(), name="cairn-claim"))
        else:
            # No claim loop to carry them: requests from other processes (`cairn runs
            # pause|cancel`) still have to reach the runs this engine executes.
            self._tasks.append(asyncio.create_task(self._control_loop(), name="cairn-control"))

    async def stop(self) -> None:
        """Stop claiming, abandon in-flight runs and hand them back for others to take."""
        self._stopping = True
        for task in [*self._tasks, *self._handing_back]:
            task.cancel()
        running = list(self.active.values())
        for task in running:
            task.cancel()
        for task in [*self._tasks, *self._handing_back, *running]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.env.store.remove_worker(self.env.owner)

    async def abandon(self) -> None:
        """Stop without a word to the database, like a killed process (for testing)."""
        self._stopping = True
        tasks = [*self._tasks, *self._handing_back, *self.active.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def wake(self) -> None:
        """Look for work now rather than at the next poll."""
        self._wake.set()

    def reserve(self) -> str | None:
        """Hold a slot for a run started in this process; None when full or stopping."""
        if self._stopping or self.free <= 0:
            return None
        self._reserved += 1
        return self.env.owner

    def release(self) -> None:
        """Give back a reserved slot."""
        self._reserved -= 1
        self._wake.set()

    def launch(self, run: RunRecord, *, fresh: bool) -> None:
        """Execute a run stored with a slot from `reserve`."""
        self._reserved -= 1
        self._start(run, fresh=fresh)

    def _start(self, run: RunRecord, *, fresh: bool) -> None:
        log.info("run %s (%s) started, attempt %d", run.run_id, run.workflow, run.attempt)
        task = asyncio.create_task(self._execute(run, fresh), name=f"cairn-run-{run.run_id}")
        self.active[run.run_id] = task

    async def _execute(self, run: RunRecord, fresh: bool) -> None:
        outcome = executor.Outcome(None)
        try:
            outcome = await executor.execute(self.env, run, fresh=fresh, live_runs=self.live)
        except Exception:
            log.exception("run %s: unexpected engine error; left for recovery", run.run_id)
        finally:
            self.active.pop(run.run_id, None)
            # A freed slot matters only if work may be waiting for one: the last claim
            # filled every slot it asked for, or this run's queue had runs held back. A run
            # that just parked may itself be due already (a message or a cancel arrived as
            # it parked), so look then too.
            parked = outcome.status in ("SLEEPING", "WAITING", "PAUSED")
            if not self._stopping and (self._backlog or parked or run.queue is not None):
                self._wake.set()
        log.info("run %s %s", run.run_id, outcome.status or "left for recovery")
        if outcome.status is None and not self._stopping:
            self._hand_back(run.run_id)
        self._on_finished(run.run_id, outcome)

    def _hand_back(self, run_id: str) -> None:
        # An attempt abandoned while this worker lives (the store failed, or the engine
        # did) would keep its run RUNNING under a heartbeating owner forever: release it
        # as an orphan, retrying until the database answers. If the run was taken over,
        # this matches nothing.
        task = asyncio.create_task(self._release(run_id), name=f"cairn-hand-back-{run_id}")
        self._handing_back.add(task)
        task.add_done_callback(self._handing_back.discard)

    async def _release(self, run_id: str) -> None:
        delay = 0.05
        while True:
            try:
                await self.env.store.release_run(run_id, self.env.owner)
                break
            except Exception as exc:
                log.warning("run %s: cannot hand it back yet (%s); retrying", run_id, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        self._wake.set()

    def executing(self, run_id: str) -> bool:
        """True while `run_id` executes in this worker."""
        return run_id in self.active

    def deliver(self, run_id: str, control: str | None) -> None:
        """Pass an operator request to a run executing here (no-op if it is not)."""
        live = self.live.get(run_id)
        if live is not None:
            live.interrupts.request(control)

    async def _poll_controls(self) -> None:
        # Requests made by other processes reach the runs we execute here.
        if not self.live:
            return
        for run_id, control in await self.env.store.controlled_runs(self.env.owner):
            live = self.live.get(run_id)
            if live is not None and not _already(live, control):
                live.interrupts.request(control)

    async def claim_once(self) -> int:
        """Claim and launch as many runs as there are free slots; returns how many."""
        if self.free <= 0 or self._stopping:
            return 0
        limit = self.free
        claimed = await self.env.store.claim_runs(
            self.env.owner,
            limit,
            now=self.env.clock.now(),
            lease=self.lease,
            queues=self.queues,
            workflows=sorted(self.env.registry.workflows),
        )
        for run_id in claimed.poisoned:
            log.error("run %s given up after too many recoveries (PoisonRun)", run_id)
            self._on_finished(run_id, executor.Outcome("FAILED"))
        for run in claimed.runs:
            self._start(run, fresh=False)
        self._backlog = len(claimed.runs) >= limit
        return len(claimed.runs)

    async def _claim_loop(self) -> None:
        while True:
            await self._wait_for_work(await self._idle_time())
            self._wake.clear()
            try:
                while await self.claim_once() and self.free > 0:
                    pass
                await self._poll_controls()
            except Exception:
                log.exception("claiming runs failed; retrying")

    async def _control_loop(self) -> None:
        while True:
            await self._wait_for_work(self.poll_interval)
            self._wake.clear()
            try:
                await self._poll_controls()
            except Exception:
                log.exception("reading operator requests failed; retrying")

    async def _wait_for_work(self, timeout: float) -> None:
        # Until this process has new work, the store hints that others made some (NOTIFY
        # on PostgreSQL, data_version on SQLite), or `timeout` passes: polling is the
        # fallback for what no hint reports (a dead worker's lease running out).
        local = asyncio.ensure_future(self._wake.wait())
        remote = asyncio.ensure_future(self.env.store.wait_for_work(timeout))
        try:
            await asyncio.wait(
                {local, remote}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (local, remote):
                if not waiter.done():
                    waiter.cancel()
                elif not waiter.cancelled() and waiter.exception() is not None:
                    log.warning("waiting for work failed: %s", waiter.exception())

    async def _idle_time(self) -> float:
        # Sleep until the next timer is due (so timers fire on time), at most a poll interval.
        if self.env.store.wakes_for_timers:
            return self.poll_interval  # the store's wait ends at each timer by itself
        try:
            due = await self.env.store.next_wake()
        except Exception:
            return self.poll_interval
        if due is None:
            return self.poll_interval
        return max(0.0, min(self.poll_interval, due - self.env.clock.now()))

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                await self.env.store.heartbeat(self.env.owner, self.env.clock.now())
                await self._expire_dead_neighbours()
            except Exception:
                log.exception("heartbeat failed; retrying")

    async def _expire_dead_neighbours(self) -> None:
        workers = await self.env.store.list_workers()
        dead = leases.dead_local_workers(workers, me=self.env.owner)
        if dead:
            log.info("recovering runs of dead workers %s", ", ".join(dead))
            await self.env.store.expire_workers(dead)
            self._wake.set()


def _already(live: LiveRun, control: str) -> bool:
    interrupts = live.interrupts
    return (control == "cancel" and interrupts.cancel) or (control == "pause" and interrupts.pause)
