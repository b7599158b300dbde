"""What each heartbeat saw: stalled runs let go, lost claims resumed, dead neighbours.

runtime/worker.py (Worker: start, stop and its grace, abandon) is the hub, built in
layers, each on the one before: runtime/executing.py (slots, attempts, hand-backs),
runtime/claiming.py (claims, the claim loop, operator requests), runtime/reconciling.py
(what each heartbeat saw: stalled runs let go, lost claims resumed, dead neighbours).
None of them imports the hub.
"""

from __future__ import annotations

import asyncio
import time

from cairn.authoring import schedules
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime import leases
from cairn.runtime.claiming import Claiming
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Beat, WorkerRecord

log = logcontext.logger("cairn.worker")


class Reconciling(Claiming):
    """Acts on each committed heartbeat: reconciles held runs with executing attempts."""

    def _stalled(self) -> list[tuple[str, int]]:
        """On the heartbeat's thread: the runs whose database work has waited a lease.

        Liveness is progress: such a run is let go of with the next beat, so that another
        worker can take it (its late write, should it ever land, is fenced off). For a
        lease from then on this worker claims nothing (set before the beat is sent: the
        runs' wake-up must not find this worker claiming): the runs are for another
        worker, and its own connections may be what is stuck (the store checks them).
        """
        stalled = list(self.env.store.health.stalled_runs(self.lease))
        if stalled:
            self._claims_resume = time.monotonic() + self.lease  # one float: any thread
        return stalled

    def _let_go(self, released: tuple[str, ...]) -> None:
        """End the attempts of runs a beat let go of: their database work is stuck."""
        stalled = self.env.store.health.stalled_runs(0.0)
        for run_id in released:
            attempt = self.active.get(run_id)
            waited = max((s for (r, _), s in stalled.items() if r == run_id), default=0.0)
            log.warning(
                "run %s: its database work got no reply for %.1f s (more than the %s "
                "lease): let go of it, for another worker to take; this attempt ends",
                run_id,
                waited,
                schedules.describe_seconds(self.lease),
            )
            if attempt is not None and attempt.task is not None:
                attempt.task.cancel()

    def _on_beat(self, sent_at: float, beat: Beat) -> None:
        """On the loop, after a heartbeat committed: reconcile and look for dead neighbours."""
        self.tenure.landed()
        if beat.released:
            self._let_go(beat.released)
        if self._stopping or not self.writable():
            return
        mine = {run_id: attempt.run.fence for run_id, attempt in self.active.items()}
        self._reconcile(sent_at, beat.owned, mine)
        self._last_beat = (sent_at, beat.owned, mine)
        dead = leases.dead_neighbours(beat.workers, me=self.env.owner, process=self.process)
        if dead:
            task = asyncio.create_task(self._expire(dead), name="cairn-expire")
            self._handing_back.add(task)
            task.add_done_callback(self._handing_back.discard)

    def _reconcile(self, sent_at: float, held: dict[str, int], mine: dict[str, int]) -> None:
        """Act on what differs, twice in a row, between the runs held and those executing.

        Two looks a heartbeat apart keep a claim or a finish caught mid-flight by one look
        from counting. A run held here that nothing executes (the reply to its start was
        lost, say) is resumed; an attempt whose run is held by someone else, or under
        another fence, is ended (its writes would be refused anyway).
        """
        if self._last_beat is None:
            return
        _, held_before, mine_before = self._last_beat
        for run_id, fence in held.items():
            if run_id in self._releasing:
                continue
            if held_before.get(run_id) == fence and fence not in (
                mine.get(run_id),
                mine_before.get(run_id),
            ):
                self._resume(run_id, fence)
        for run_id, fence in mine.items():
            attempt = self.active.get(run_id)
            if attempt is None or attempt.started >= sent_at:
                continue
            if held.get(run_id) != fence and held_before.get(run_id) != fence:
                if mine_before.get(run_id) == fence and attempt.task is not None:
                    log.warning(
                        "run %s: this worker no longer holds it (taken over while this "
                        "process was away?); ending this attempt",
                        run_id,
                    )
                    attempt.task.cancel()

    def _resume(self, run_id: str, fence: int) -> None:
        async def resume() -> None:
            run = await self.env.store.read(run_ops.get_run(run_id))
            if run is None or (run.owner, run.fence, run.status) != (
                self.env.owner,
                fence,
                RunStatus.RUNNING,
            ):
                return
            if run_id in self.active or run_id in self._releasing or self._stopping:
                return
            log.warning(
                "run %s is held by this worker but was not executing (a lost reply?); resuming it",
                run_id,
            )
            self._start(run, fresh=False, epoch=self.tenure.epoch)

        task = asyncio.create_task(resume(), name=f"cairn-resume-{run_id}")
        self._handing_back.add(task)
        task.add_done_callback(self._handing_back.discard)

    async def _expire(self, dead: list[str]) -> None:
        try:
            await self._expire_dead_neighbours_now(dead)
        except Exception as exc:
            log.warning("expiring dead workers failed: %s", exc)

    async def _expire_dead_neighbours(self, workers: list[WorkerRecord]) -> None:
        dead = leases.dead_neighbours(workers, me=self.env.owner, process=self.process)
        if dead:
            await self._expire_dead_neighbours_now(dead)

    async def _expire_dead_neighbours_now(self, dead: list[str]) -> None:
        log.info("recovering runs of dead workers %s", ", ".join(dead))
        await self.env.store.write(worker_ops.expire_workers(dead))
        self._wake.set()
