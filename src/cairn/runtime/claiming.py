"""How a worker finds work: claims (by polling, or by run id), and operator requests.

runtime/worker.py (Worker: start, stop and its grace, abandon) is the hub, built in
layers, each on the one before: runtime/executing.py (slots, attempts, hand-backs),
runtime/claiming.py (claims, the claim loop, operator requests), runtime/reconciling.py
(what each heartbeat saw: stalled runs let go, lost claims resumed, dead neighbours).
None of them imports the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from cairn.core import executor
from cairn.core.live_run import LiveRun
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime import leases
from cairn.runtime.executing import Executing
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import control as control_ops
from cairn.store.programs import workers

log = logcontext.logger("cairn.worker")


class Claiming(Executing):
    """Claims runs into free slots; passes requests from other processes to its runs."""

    # The clock's time of the last claim: what was due by then, that claim saw.
    _looked_at = float("-inf")

    async def _poll_controls(self) -> None:
        # Requests made by other processes reach the runs we execute here.
        if not self.live:
            return
        for run_id, control in await self.env.store.read(
            control_ops.controlled_runs(self.env.owner)
        ):
            live = self.live.get(run_id)
            if live is not None and not _already(live, control):
                live.interrupts.request(control)

    async def claim_once(self) -> int:
        """Claim and launch as many runs as there are free slots; returns how many."""
        if self.free <= 0 or self._stopping or time.monotonic() < self._claims_resume:
            return 0
        limit = self.free
        epoch = self.tenure.epoch  # a claim answered late must not skip the lease check
        stale = leases.may_judge_heartbeats(
            since=self._started, trouble_at=self.env.store.health.trouble_at(), lease=self.lease
        )
        # Now and then a dead worker's runs go before new ones: under a backlog they would
        # otherwise wait until the queue drains. Not every claim, to keep claims cheap.
        orphans_first = time.monotonic() >= self._orphans_due
        if orphans_first:
            self._orphans_due = time.monotonic() + self.lease / 3
        now = self.env.clock.now()
        self._looked_at = now
        claimed = await self.env.store.write(
            claim_ops.claim(
                self.env.owner,
                limit,
                now=now,
                stale=stale,
                queues=self.queues,
                workflows=self.executes(),
                versions={
                    name: wf.version
                    for name, wf in self.env.registry.workflows.items()
                    if wf.version is not None
                },
                orphans_first=orphans_first,
            )
        )
        for run_id, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", run_id)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self._on_finished(run_id, executor.Outcome(RunStatus.FAILED))
        if self.env.observer is not None and claimed.runs:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        for run in claimed.runs:
            self._start(run, fresh=False, epoch=epoch)
        self._backlog = len(claimed.runs) >= limit
        return len(claimed.runs)

    def judges_heartbeats(self) -> bool:
        """Whether this worker may take a run whose owner's heartbeat is only old (leases.py)."""
        return leases.may_judge_heartbeats(
            since=self._started, trouble_at=self.env.store.health.trouble_at(), lease=self.lease
        )

    async def take(self, run_id: str) -> bool:
        """Claim `run_id` alone and execute it here; wait until this attempt of it ends.

        What a transport's message leads to (cairn.celery): the claim applies the lease,
        queue and liveness rules of any claim, so a message delivered twice, or for a run
        another worker holds or that has finished, takes nothing. Returns whether it took
        the run.
        """
        if self._stopping or self.free <= 0:
            return False
        epoch = self.tenure.epoch
        stale = self.judges_heartbeats()
        now = self.env.clock.now()
        claimed = await self.env.store.write(
            claim_ops.claim(
                self.env.owner,
                1,
                now=now,
                stale=stale,
                workflows=self.executes(),
                versions={
                    name: wf.version
                    for name, wf in self.env.registry.workflows.items()
                    if wf.version is not None
                },
                only=[run_id],
            )
        )
        for poisoned, workflow in claimed.poisoned.items():
            log.error("run %s given up after too many recoveries (PoisonRun)", poisoned)
            if self.env.observer is not None:
                self.env.observer.poisoned(workflow)
            self._on_finished(poisoned, executor.Outcome(RunStatus.FAILED))
        if not claimed.runs:
            return False
        if self.env.observer is not None:
            self.env.observer.claimed(claimed.runs, claimed.due, now)
        self._start(claimed.runs[0], fresh=False, epoch=epoch)
        attempt = self.active.get(run_id)
        if attempt is not None and attempt.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(attempt.task)
        return True

    async def _claim_loop(self) -> None:
        while self.writable():
            await self._wait_for_work(await self._idle_time())
            self._wake.clear()
            try:
                while await self.claim_once() and self.free > 0:
                    pass
                await self._poll_controls()
            except Exception:
                if self.writable():
                    log.exception("claiming runs failed; retrying")

    async def _control_loop(self) -> None:
        while self.writable():
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
        if self.free <= 0:
            # What comes due meanwhile waits for a slot: the first one freed wakes the loop.
            self._backlog = True
            return self.poll_interval
        if time.monotonic() < self._claims_resume:
            return self.poll_interval  # no claim before then
        try:
            due = await self.env.store.read(workers.next_wake())
        except Exception:
            return self.poll_interval
        if due is None or due <= self._looked_at:
            # The last claim saw it due and left it: its queue is full (a freed place wakes
            # the loop), or it is not ours to take. Timing it again would claim in a loop.
            return self.poll_interval
        return max(0.0, min(self.poll_interval, due - self.env.clock.now()))


def _already(live: LiveRun, control: str) -> bool:
    interrupts = live.interrupts
    return (control == "cancel" and interrupts.cancel) or (control == "pause" and interrupts.pause)
