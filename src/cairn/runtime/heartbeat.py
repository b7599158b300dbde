"""Heartbeats on a thread of their own, with a database connection of their own.

A worker's heartbeat must not depend on its event loop: a step that blocks the loop, or
a SQLite statement waiting for a lock, would otherwise starve it and let other workers
take over runs that are still executing. So the beats run on a thread, through the
store's side channel (`Store.side_channel`), every lease / 3, and at once when asked.

Each beat that commits renews the worker's tenure (in the thread, at once) and hands
what it saw (the runs the worker holds, every worker) to the event loop. A store with no
side channel (SQLite `:memory:`, one process only) beats from the loop instead.

Alive is not enough to keep a run: each beat also lets go of (queues again, in the same
transaction) the runs `let_go` names, those whose database work has made no progress
for a lease, so that a worker whose connections hang while its heartbeat gets through
does not hold them for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence

from cairn import cancelling
from cairn.core.tenure import Tenure
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.store.programs import workers as worker_ops
from cairn.store.protocol import SideChannel, Store
from cairn.store.records import Beat, WorkerRecord

log = logcontext.logger("cairn.worker")

Landed = Callable[[float, Beat], None]
Stalled = Callable[[], Sequence[tuple[str, int]]]

# After a beat that failed, try again this soon (the worker's trust is running out).
RETRY_AFTER = 0.5


class Heartbeat:
    """Beats for one worker until stopped; `on_beat(sent_at, beat)` runs on the loop."""

    def __init__(
        self,
        store: Store,
        worker: Callable[[], WorkerRecord],
        tenure: Tenure,
        *,
        interval: float,
        on_beat: Landed,
        loop: asyncio.AbstractEventLoop,
        let_go: Stalled = tuple,
    ) -> None:
        self._store = store
        self._worker = worker
        self._let_go = let_go  # any thread: the runs (id, fence) to release with a beat
        self._tenure = tenure
        self.interval = interval
        self._on_beat = on_beat
        self._loop = loop
        self._stop = threading.Event()
        self._now = threading.Event()  # beat now (a step waits for a fresh heartbeat)
        self._now_on_loop = asyncio.Event()  # the same, when beating on the loop
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing_since: float | None = None

    def start(self) -> None:
        """Start beating: on a thread with its own connection, or on the loop."""
        channel = self._store.side_channel()
        self._tenure.request_beat = self.beat_now
        if channel is None:
            self._task = self._loop.create_task(self._beat_on_loop(), name="cairn-heartbeat")
            return
        self._thread = threading.Thread(
            target=self._beat_on_thread, args=(channel,), name="cairn-heartbeat", daemon=True
        )
        self._thread.start()

    def beat_now(self) -> None:
        """Beat at once instead of at the next interval (from the loop, or any thread)."""
        self._now.set()
        if self._task is not None:
            self._now_on_loop.set()

    def cease(self) -> None:
        """Beat no more from now on (any thread); `stop` still waits for the thread."""
        self._stop.set()
        self._now.set()
        self._now_on_loop.set()

    async def stop(self, *, within: float = 10.0) -> None:
        """Stop beating; a beat in flight that lands later writes nothing (workers.beat_at).

        Waits up to `within` seconds for the thread's beat in flight: one on a connection
        that does not answer is left to end with the process (the thread is a daemon).
        """
        self._stop.set()
        self._now.set()
        self._now_on_loop.set()
        if self._task is not None:
            await cancelling.stop([self._task], within=max(within, cancelling.PATIENCE))
            self._task = None
        if self._thread is not None:
            thread, self._thread = self._thread, None
            await asyncio.to_thread(thread.join, within)

    def _beat_on_thread(self, channel: SideChannel) -> None:
        try:
            while not self._stop.is_set():
                sent_at = time.monotonic()
                try:
                    beat = channel.beat(self._worker(), self._let_go(), self._stop.is_set)
                except StoreError as exc:
                    self._failed(exc)
                else:
                    if self._stop.is_set():
                        break  # landed after the stop: it wrote nothing (workers.beat_at)
                    self._landed(sent_at, beat)
                self._wait(sent_at)
        finally:
            channel.close()

    def _wait(self, sent_at: float) -> None:
        delay = RETRY_AFTER if self._failing_since is not None else self.interval
        self._now.wait(max(0.0, sent_at + delay - time.monotonic()))
        self._now.clear()

    def _landed(self, sent_at: float, beat: Beat) -> None:
        self._tenure.renewed(sent_at)
        if self._failing_since is not None:
            log.warning(
                "heartbeats reach the database again (after %.1f s)",
                time.monotonic() - self._failing_since,
            )
            self._failing_since = None
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody to tell
            self._loop.call_soon_threadsafe(self._on_beat, sent_at, beat)

    def _failed(self, exc: StoreError) -> None:
        self._store.health.trouble()
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning("heartbeat failed (%s); retrying every %.1f s", exc, RETRY_AFTER)

    async def _beat_on_loop(self) -> None:
        while not self._stop.is_set():
            sent_at = time.monotonic()
            try:
                beat = await self._store.write(
                    worker_ops.beat(self._worker(), self._let_go(), self._stop.is_set)
                )
            except StoreError as exc:
                self._failed(exc)
            else:
                if self._stop.is_set():
                    return  # it wrote nothing (workers.beat_at)
                self._tenure.renewed(sent_at)
                self._failing_since = None
                self._on_beat(sent_at, beat)
            delay = RETRY_AFTER if self._failing_since is not None else self.interval
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, sent_at + delay - time.monotonic())):
                    await self._now_on_loop.wait()
            self._now_on_loop.clear()
            self._now.clear()
