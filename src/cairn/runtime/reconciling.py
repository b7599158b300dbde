"""What each heartbeat saw: stalled runs let go, lost claims resumed, dead neighbours.

One of the parts a Worker (runtime/worker.py) holds: made with the worker's Executions
(runtime/executing.py), whose attempts it checks against what each heartbeat says, and
its Claimer (runtime/claiming.py), which it holds back while stalled runs are let go.
"""

from __future__ import annotations

import asyncio
import time

from cairn.authoring import schedule_ticks
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.runtime import leases
from cairn.runtime.claiming import Claimer
from cairn.runtime.executing import Executions
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Beat, WorkerRecord

log = logcontext.logger("cairn.worker")


class Reconciler:
    """Acts on each committed heartbeat: reconciles held runs with executing attempts."""

    def __init__(self, executions: Executions, claimer: Claimer) -> None:
        self.executions = executions
        self.claimer = claimer
        self.env = executions.env
        self.lease = executions.lease
        self.tenure = executions.tenure
        self.active = executions.active
        self.tasks: set[asyncio.Task[None]] = set()  # resumes and expiries in flight
        self._looking = False  # for live workers of versions runs were handed back for
        # The previous look: (when sent, runs held, attempts then).
        self._last_beat: tuple[float, dict[str, int], dict[str, int]] | None = None

    def stalled(self) -> list[tuple[str, int]]:
        """On the heartbeat's thread: the runs whose database work has waited a lease.

        Liveness is progress: such a run is let go of with the next beat, so that another
        worker can take it (its late write, should it ever land, is fenced off). For a
        lease from then on this worker claims nothing (set before the beat is sent: the
        runs' wake-up must not find this worker claiming): the runs are for another
        worker, and its own connections may be what is stuck (the store checks them).
        """
        stalled = list(self.env.store.health.stalled_runs(self.lease))
        if stalled:
            self.claimer.resume_at = time.monotonic() + self.lease  # one float: any thread
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
                schedule_ticks.describe_seconds(self.lease),
            )
            if attempt is not None and attempt.task is not None:
                attempt.task.cancel()

    def on_beat(self, sent_at: float, beat: Beat) -> None:
        """On the loop, after a heartbeat committed: reconcile and look for dead neighbours."""
        self.tenure.landed()
        if beat.released:
            self._let_go(beat.released)
        if self.executions.stopping or not self.executions.writable():
            return
        mine = {run_id: attempt.run.fence for run_id, attempt in self.active.items()}
        self._reconcile(sent_at, beat.owned, mine)
        self._last_beat = (sent_at, beat.owned, mine)
        dead = leases.dead_neighbours(
            beat.workers, me=self.env.owner, process=self.executions.process
        )
        if dead:
            task = asyncio.create_task(self._expire(dead), name="cairn-expire")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        awaited = self.executions.keyless.for_versions(self.env.clock.now())
        if awaited and not self._looking:
            self._looking = True
            task = asyncio.create_task(self._unserved(awaited), name="cairn-versions")
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _unserved(self, awaited: dict[tuple[str, str], list[str]]) -> None:
        """End the back-off of runs handed back for a version no live worker runs any more.

        They said they wait for a worker of that version, which is gone (killed, its
        lease run out): the next claim takes them, and fails them naming both versions
        (core/executor.py), instead of their waiting out the back-off (up to 5 minutes).
        """
        try:
            keyless, ended = self.executions.keyless, False
            for (workflow, version), items in awaited.items():
                served = worker_ops.version_served(workflow, version, self.env.owner)
                if await self.env.store.read(served):
                    continue
                for item in items:
                    keyless.end_backoff(item)
                    ended = True
            if ended:
                self.executions.wake()
        except Exception as exc:
            log.warning("looking for workers of handed-back runs' versions failed: %s", exc)
        finally:
            self._looking = False

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
            if run_id in self.executions.releasing:
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
            if (
                run_id in self.active
                or run_id in self.executions.releasing
                or self.executions.stopping
            ):
                return
            log.warning(
                "run %s is held by this worker but was not executing (a lost reply?); resuming it",
                run_id,
            )
            self.executions.start(run, fresh=False, epoch=self.tenure.epoch)

        task = asyncio.create_task(resume(), name=f"cairn-resume-{run_id}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _expire(self, dead: list[str]) -> None:
        try:
            await self._expire_dead_neighbours_now(dead)
        except Exception as exc:
            log.warning("expiring dead workers failed: %s", exc)

    async def expire_dead_neighbours(self, workers: list[WorkerRecord]) -> None:
        """Hand back the runs of the `workers` that are dead (see leases.dead_neighbours)."""
        dead = leases.dead_neighbours(workers, me=self.env.owner, process=self.executions.process)
        if dead:
            await self._expire_dead_neighbours_now(dead)

    async def _expire_dead_neighbours_now(self, dead: list[str]) -> None:
        log.info("recovering runs of dead workers %s", ", ".join(dead))
        await self.env.store.write(worker_ops.expire_workers(dead))
        self.executions.wake()
