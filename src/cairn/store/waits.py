"""Waits for the database in flight: since when, on which connection, and for which run.

A store registers each wait for a reply (`Waits.begin` / `end`); the run it is made for
comes from `on_behalf_of`, which the executor sets for an attempt's whole context. Two
readers use the list: the store itself, to check connections that stopped answering
(PostgreSQL, `stalls`), and the worker, whose heartbeat lets go of a run whose
database work has been stuck for a whole lease (liveness is progress, not a beat alone).

Written on the event loop's thread, read from the heartbeat's: a copy of the dict is one
C call, so readers see a consistent set without a lock on the hot path.

A blocked event loop (an async step calling `time.sleep`) is not a stalled database: the
replies that came meanwhile are not read until the loop runs again. With a loop watch
(`watch_loop`, the worker's watchdog) a wait is aged only from when the loop last began
answering again, and not at all while it is blocked.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass

# The run (id, fence) whose attempt is using the database in this context, if any.
on_behalf_of: ContextVar[tuple[str, int] | None] = ContextVar("cairn_on_behalf_of", default=None)


def attempt_of(run_id: str, fence: int) -> Token[tuple[str, int] | None]:
    """Mark the current context as the attempt of `run_id` under `fence`."""
    return on_behalf_of.set((run_id, fence))


# Undo `attempt_of` (the ContextVar's own method: no Python frame at every run's end).
left: Callable[[Token[tuple[str, int] | None]], None] = on_behalf_of.reset


@dataclass(frozen=True, slots=True)
class Wait:
    """One wait for a reply: since (time.monotonic()), the connection, the runs it serves."""

    since: float
    conn: object
    runs: tuple[tuple[str, int], ...]


class Waits:
    """The waits for the database a store has in flight."""

    __slots__ = ("_keys", "_responsive_since", "_waits")

    def __init__(self) -> None:
        self._waits: dict[int, Wait] = {}
        self._keys = itertools.count()
        # Since when (time.monotonic()) the event loop has been answering; None: unknown.
        self._responsive_since: Callable[[], float] | None = None

    def watch_loop(self, responsive_since: Callable[[], float] | None) -> None:
        """Age waits only while the event loop answers (see the module); None: always.

        `responsive_since` (any thread) gives when the loop last began answering again
        after a block, or now while it is blocked.
        """
        self._responsive_since = responsive_since

    def _floor(self) -> float:
        """No wait is older than this: when the loop last began answering (0: unknown)."""
        answering = self._responsive_since
        return 0.0 if answering is None else answering()

    def begin(self, conn: object, runs: tuple[tuple[str, int], ...] | None = None) -> int:
        """A wait on `conn` starts, for `runs` (default: the run of this context)."""
        if runs is None:
            run = on_behalf_of.get()
            runs = () if run is None else (run,)
        key = next(self._keys)
        self._waits[key] = Wait(time.monotonic(), conn, runs)
        return key

    def end(self, key: int) -> None:
        """The wait `key` is over (answered, failed or cancelled)."""
        self._waits.pop(key, None)

    def older_than(self, seconds: float) -> list[Wait]:
        """The waits in flight for longer than `seconds`, oldest first (any thread)."""
        cutoff = time.monotonic() - seconds
        floor = self._floor()
        return sorted(
            (wait for wait in self._waits.copy().values() if max(wait.since, floor) <= cutoff),
            key=lambda wait: wait.since,
        )

    def stalled_runs(self, seconds: float) -> dict[tuple[str, int], float]:
        """Runs (id, fence) with a wait older than `seconds`: how long the oldest has lasted."""
        now = time.monotonic()
        floor = self._floor()
        stalled: dict[tuple[str, int], float] = {}
        for wait in self.older_than(seconds):
            for run in wait.runs:
                stalled.setdefault(run, now - max(wait.since, floor))
        return stalled
