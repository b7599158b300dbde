"""Requests reaching a live run: cancel, pause, the workflow timeout, and hand back.

Requests are acted on at durable points (a new step, sleep, wait or child), never in the
middle of a step; a parked run is woken to meet them. `cairn.shield()` holds cancel and
pause off until the shielded code is done. A hand back (its worker is stopping) is not
seen by workflow code at all: the run goes on elsewhere from the same point, so it is not
held off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cairn.authoring import shield
from cairn.core.signals import HandBack, Suspend
from cairn.errors import Cancelled
from cairn.models import RunStatus


class Interrupts:
    """The pending requests of one live run.

    A cancellation is delivered once, at one durable point (its key is `delivered_at`):
    the cleanup that follows (`except Cancelled`, `finally`) may then call steps, sleep or
    wait like any code. An earlier attempt's delivery point (`recorded_at`, from the
    journal) is where a replay delivers it again, and nowhere else.
    """

    __slots__ = (
        "_loop",
        "_stops",
        "_wakes",
        "cancel",
        "delivered_at",
        "handing_back",
        "pause",
        "reason",
        "recorded_at",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, control: str | None) -> None:
        self._loop = loop
        self.cancel = control == "cancel"
        self.pause = control == "pause"
        self.reason = "cancelled" if self.cancel else ""
        self.delivered_at: str | None = None
        self.recorded_at: str | None = None
        # The worker is stopping: leave at the next durable point (see HandBack).
        self.handing_back = False
        # What stops the steps blocked right now (a statement, a request) on a cancel.
        self._stops: list[Callable[[], None]] = []
        # What wakes the waits that meet a cancel or a pause where they stand (on_request).
        self._wakes: list[Callable[[], None]] = []

    @property
    def delivered(self) -> bool:
        """True once Cancelled was raised into the workflow."""
        return self.delivered_at is not None

    def request(self, control: str | None, reason: str = "") -> None:
        """Record a request (None clears a pause); acted on at the next durable point."""
        if control == "cancel":
            if self.delivered_at is None:
                self.reason = reason or "cancelled"
                stops, self._stops = self._stops, []
                for stop in stops:
                    stop()
            self.cancel = True
        elif control == "pause":
            self.pause = True
        else:
            self.pause = False
            return
        for wake in self._wakes:
            wake()

    def asked(self) -> bool:
        """Whether a cancel or a hand back is pending (an outage need not be waited out).

        Not a cancel that is held off (inside `cairn.shield()`) or already delivered (its
        cleanup runs): the replay would not meet it, and would come back to the same wait.
        """
        return self.handing_back or self.cutting()

    def cutting(self) -> bool:
        """Whether a cancel stops the code here now (not shielded, not delivered yet).

        What gives up a returned step's wait for the blob store to take its result: a hand
        back does not (the stop's grace lets it be stored; the grace's end cuts it off).
        """
        return self.cancel and self.delivered_at is None and not self.shielded()

    def on_cancel(self, stop: Callable[[], None]) -> Callable[[], None]:
        """Call `stop()` (on the loop, once) when the run is cancelled; returns the undo.

        For steps that block where `check_cancelled` cannot be called (a statement waiting
        for a lock, a request waiting for bytes). Not inside `cairn.shield()`, nor in the
        cleanup after a delivered cancellation: those steps are meant to finish.
        """
        if self.shielded() or self.delivered_at is not None:
            return _nothing
        if self.cancel:
            stop()
            return _nothing
        self._stops.append(stop)

        def undo() -> None:
            try:  # from a step's thread, maybe while `request` takes the list
                self._stops.remove(stop)
            except ValueError:
                pass

        return undo

    def on_request(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake()` (on the loop) at each cancel or pause request; returns the undo.

        For a wait that meets the request where it stands (core/blob_reads.py).
        """
        self._wakes.append(wake)
        return lambda: self._wakes.remove(wake)

    def pausable(self) -> bool:
        """Whether a pause is pending that parks the run where it stands now.

        Not inside `cairn.shield()`, and not while a cancel is pending or its cleanup
        runs (a cancel goes first, as at a durable point).
        """
        return self.pause and not self.cancel and not self.shielded()

    @staticmethod
    def shielded() -> bool:
        """True inside `cairn.shield()`."""
        return shield.active()

    def recorded(self, at: str, reason: str) -> None:
        """An earlier attempt delivered the cancellation at durable point `at`."""
        self.cancel = True
        self.recorded_at = at
        self.reason = reason or "cancelled"

    def at_recorded_point(self, key: str) -> None:
        """Deliver the cancellation if `key` is where an earlier attempt delivered it."""
        if key == self.recorded_at and self.delivered_at is None:
            self.deliver(key)

    def deliver(self, key: str) -> None:
        """Raise Cancelled into the workflow at durable point `key` (once)."""
        self.delivered_at = key
        raise Cancelled(self.reason)

    def stop_step(self) -> None:
        """In a step's code: raise Cancelled if the run was cancelled (unless shielded).

        The step stops, and Cancelled reaches the workflow at its call (LiveSteps._step).
        """
        if self.cutting():
            raise Cancelled(self.reason)

    def hand_back(self) -> None:
        """Ask the attempt to leave at its next durable point (its worker is stopping)."""
        self.handing_back = True

    def met(self) -> bool:
        """Whether a durable point now acts on a pending cancel or pause (see checkpoint).

        Not inside `cairn.shield()`, nor for a cancel delivered already (its cleanup runs:
        a pause waits for the cleanup's end too) or to be delivered at its recorded point.
        """
        if not (self.cancel or self.pause) or self.shielded():
            return False
        return not self.cancel or (self.delivered_at is None and self.recorded_at is None)

    def checkpoint(self, key: str) -> None:
        """Act on a pending request at durable point `key` (cancel and pause: unless shielded).

        Raises HandBack, Cancelled (the first time only) or Suspend("PAUSED").
        """
        if self.handing_back:
            raise HandBack()
        if not (self.cancel or self.pause) or self.shielded():
            return
        if self.cancel:
            if self.recorded_at is None and self.delivered_at is None:
                self.deliver(key)
            return  # delivered already (or, on replay, at its recorded point only)
        raise Suspend(RunStatus.PAUSED.value, None)


def _nothing() -> None:
    return None
