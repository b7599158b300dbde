"""The step attempts this worker executes, published with its heartbeats, soon enough.

Each heartbeat stores the attempts in flight (`workers.executing`, store/in_flight.py):
people see which step a run executes, and a worker that takes a run over from this one,
dead, records each as interrupted. That costs no write per step, only latency: a
heartbeat comes every lease / 3. So a look every `LOOK` seconds asks for a beat at once
when an attempt seen in flight at the previous look still is and no beat published it.
An attempt is thus published once it has run between `LOOK` and 2 x `LOOK` seconds (plus
a beat's round trip); a shorter one may never be, and is then neither shown executing
nor, should the worker die, recorded as interrupted. A worker that stops cleanly knows
what it cuts short, however short, and hands it back with the run (`cut_short`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from cairn.core.live_run import LiveRun
from cairn.store import in_flight
from cairn.store.in_flight import InFlightStep
from cairn.store.records import AttemptRecord

LOOK = 0.5  # seconds between looks at the attempts in flight
STOPPED = "stopped (its engine was stopped)"  # why an attempt cut short by a stop ended

Seen = frozenset[tuple[str, int, str, int]]  # (run id, fence, step key, attempt)


class InFlight:
    """What the worker's heartbeat says is in flight, and a watch that keeps it current."""

    def __init__(self, lives: Mapping[str, LiveRun]) -> None:
        self._lives = lives  # the worker's executing attempts, by run id (changed on the loop)
        self._published: Seen = frozenset()
        self._seen: Seen = frozenset()

    def steps(self) -> list[InFlightStep]:
        """The step attempts executing now (from any thread)."""
        for _ in range(3):
            try:
                return [step for live in list(self._lives.values()) for step in of(live)]
            except RuntimeError:  # changed while the heartbeat's thread looked: look again
                continue
        return []

    def snapshot(self) -> str | None:
        """The `workers.executing` text for the heartbeat about to be sent (its thread)."""
        steps = self.steps()
        self._published = _ids(steps)
        return in_flight.encode(steps)

    def unpublished(self) -> bool:
        """True if an attempt in flight at the previous look still is, and is not published.

        Each call is a look (on the event loop, where the attempts change: no retry). It
        goes over every attempt in flight, so it makes no object per attempt but its id.
        """
        seen, published = self._seen, self._published
        now = []
        due = False
        for live in self._lives.values():
            flying = live.attempt.flying
            if flying:
                run_id, fence = live.run.run_id, live.lease.fence
                for key, (_, attempt, _) in flying.items():
                    ident = (run_id, fence, key, attempt)
                    now.append(ident)
                    due = due or (ident in seen and ident not in published)
        self._seen = frozenset(now)
        return due

    async def watch(self, beat_now: Callable[[], None]) -> None:
        """Look every LOOK seconds; ask for a heartbeat when a look finds one unpublished."""
        while True:
            await asyncio.sleep(LOOK)
            if self.unpublished():
                beat_now()


def cut_short(live: LiveRun | None, *, worker: str, now: float) -> list[AttemptRecord]:
    """The step attempts `live` has in flight, as interrupted by its worker's stop.

    A stopping worker hands these back with the run (workers.release_run): the next
    worker numbers its attempts after them, and the history shows the step may have run.
    """
    if live is None:
        return []
    execution = live.run.execution
    return [
        in_flight.interrupted(step, execution=execution, worker=worker, now=now, why=STOPPED)
        for step in of(live)
    ]


def of(live: LiveRun) -> list[InFlightStep]:
    """The step attempts one attempt of a run has in flight."""
    run_id, fence = live.run.run_id, live.lease.fence
    return [
        InFlightStep(run_id, fence, key, name, attempt, started)
        for key, (name, attempt, started) in list(live.attempt.flying.items())
    ]


def _ids(steps: list[InFlightStep]) -> Seen:
    return frozenset((s.run_id, s.fence, s.key, s.attempt) for s in steps)
