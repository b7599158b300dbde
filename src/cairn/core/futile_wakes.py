"""Counting a run's futile wake-ups: woken, replayed, parked again with nothing recorded.

A run is woken by a message one of its waits takes, by a timer or by an operator, and
then records something. One that keeps waking and parking again without progress burns
a worker's CPU for as long as its wait lasts: each worker counts, per run, such wake-ups
in the last minute, and the count is stored when the run parks, so that a run past
SPINNING_AFTER is flagged. A safety net: a message its waits do not take no longer
wakes a run, so this should stay at zero.
"""

from __future__ import annotations

from collections import deque

WINDOW = 60.0  # seconds the count looks back
_SWEEP_EVERY = 256  # notes between sweeps of runs not seen within the window


class FutileWakes:
    """Per run, the times it parked again without progress within the last WINDOW."""

    def __init__(self) -> None:
        self._seen: dict[str, deque[float]] = {}
        self._notes = 0

    def note(self, run_id: str, *, progressed: bool, now: float) -> int:
        """Count a park of `run_id` at `now`; its futile wake-ups in the window.

        0 if it progressed, which forgets the earlier ones.
        """
        if progressed:
            self._seen.pop(run_id, None)
            return 0
        times = self._seen.setdefault(run_id, deque())
        times.append(now)
        _drop_before(times, now - WINDOW)
        self._notes += 1
        if self._notes % _SWEEP_EVERY == 0:
            self._sweep(now)
        return len(times)

    def forget(self, run_id: str) -> None:
        """The run finished (or moved on): nothing more to count for it."""
        self._seen.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._seen)

    def _sweep(self, now: float) -> None:
        # Runs that stopped waking for nothing would otherwise stay here for ever.
        for run_id, times in list(self._seen.items()):
            _drop_before(times, now - WINDOW)
            if not times:
                del self._seen[run_id]


def _drop_before(times: deque[float], since: float) -> None:
    while times and times[0] <= since:
        times.popleft()
