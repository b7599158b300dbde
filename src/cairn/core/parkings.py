"""How an attempt parks: its status, when it wakes and what wakes it (core/executor.py)."""

from __future__ import annotations

from dataclasses import dataclass

from cairn.core.live_run import LiveRun
from cairn.core.signals import Suspend
from cairn.models import RunStatus


@dataclass(frozen=True, slots=True)
class Parking:
    """How a run parks: status, wake time, what it waits for and what wakes it."""

    status: str
    wake_at: float | None
    waiting_for: str | None
    waits_on: list[str] | None = None  # channels whose messages wake it (None: any)


def parking(live: LiveRun, parked: Suspend) -> Parking:
    """How the run parks, from the signal it unwound with and its open waits.

    The branches of an `asyncio.gather` park together: the run wakes for a message any
    of their waits takes and at the first of their deadlines or sleeps, whichever branch
    happened to unwind first (a sleep beside waits parks WAITING, so messages wake it).
    """
    status, wake_at, waiting_for = parked.status, parked.wake_at, parked.waiting_for
    waits_on = None
    if status in (RunStatus.SLEEPING.value, RunStatus.WAITING.value):
        channels, first_time, first_wait = live.attempt.parked_waits()
        if first_time is not None:
            wake_at = first_time if wake_at is None else min(wake_at, first_time)
        if channels:
            waits_on = channels
            if status == RunStatus.SLEEPING.value:
                status, waiting_for = RunStatus.WAITING.value, first_wait
    return Parking(status, live.attempt.park_time(wake_at), waiting_for, waits_on)
