"""How long a worker may trust that it still holds its runs, without asking the database.

A heartbeat that commits proves the worker was alive when it was sent; other workers
judge it dead only once that heartbeat is older than its lease by the database's clock.
So for two thirds of a lease after sending a heartbeat that then committed, nobody can
have taken its runs, and a step may start. Past that (the process was frozen, the
database was away, the heartbeat thread starved), the worker's runs may have been taken
over: the first heartbeat to commit after that starts a new *epoch*, and each attempt,
before its next step, checks once that its run's fence is still its own
(`LiveAttempt.hold_lease`). That check tells the truth because a claim of the worker's
runs and its heartbeat are serialized (store/programs/orphans.py): the claim either sees
the heartbeat and leaves the runs, or commits before it.

The check costs a clock read and two comparisons per step; the state is one tuple so
that the heartbeat thread replaces it atomically.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

# Of a lease, how long after sending a heartbeat that committed the worker trusts it.
TRUSTED_SHARE = 2 / 3


class Tenure:
    """The freshness of one worker's heartbeat, and the epoch it belongs to."""

    def __init__(self, lease: float) -> None:
        self.lease = lease
        # (trusted until, in time.monotonic(); epoch): one tuple, replaced whole by the
        # heartbeat thread, read whole by `trusts` (inlined on the hot path of a step).
        self.state = (0.0, 0)
        # Asks the heartbeat for a beat now; set by whoever drives the heartbeats.
        self.request_beat: Callable[[], None] = lambda: None
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def epoch(self) -> int:
        """The current epoch: attempts begun in it need no check while it is fresh."""
        return self.state[1]

    def renewed(self, sent_at: float) -> None:
        """A heartbeat sent at `sent_at` (time.monotonic()) committed. Any thread.

        If the worker's trust lapsed before now (it was sent late, or took that long to
        commit), a new epoch begins: a claim may have taken runs in the gap, committing
        before this heartbeat did (a claim and a heartbeat are serialized by row locks,
        see store/programs/orphans.py), so each attempt's fence check now sees it.
        """
        until, epoch = self.state
        if time.monotonic() > until:
            epoch += 1
        self.state = (max(until, sent_at + self.lease * TRUSTED_SHARE), epoch)

    def trusts(self, epoch: int) -> bool:
        """True if an attempt begun in `epoch` may start a step now, unchecked."""
        until, current = self.state
        return current == epoch and time.monotonic() < until

    def fresh(self) -> bool:
        """True while the last heartbeat is recent enough, whatever the epoch."""
        return time.monotonic() < self.state[0]

    def landed(self) -> None:
        """On the event loop, after a heartbeat committed: wake `renewal` waiters."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def renewal(self, timeout: float) -> None:
        """Ask for a heartbeat now and wait (up to `timeout`) until one has committed."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.request_beat()
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
