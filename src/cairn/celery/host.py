"""Host: the cairn engine inside a Celery worker process, and its dispatcher.

The engine runs on an event loop in a thread of its own and never polls for runs
(`Engine(polls=False)`): a `cairn.run` task asks it to claim the run its message names
(`Worker.take`, with cairn's lease, fencing and liveness rules) and blocks its Celery slot
until that attempt of the run ends (it finishes, parks or is handed back). A `cairn.runs`
task does the same for the ids of a batch message (one Celery message for many runs: its
receipt, pool thread and acknowledgement cost as much as one run on SQLite): they are
claimed together and its Celery thread is held until all of them have ended. An id that
finds no free slot (a batch brings more runs than threads) waits here for one, first
come first served: its message is acknowledged, so the run is this worker's to take;
a worker killed meanwhile leaves it claimable, published again like a lost message.

The dispatcher, a task on the same loop, is what turns the database into messages: it
reads which runs a claim could take now (new, due after a sleep, a retry backoff or a
message, or left by a dead worker) and publishes each id once per state. A run still
claimable in the same state later was not taken by its message (a queue limit refused
it, or the message was lost with a worker): it is published again once a slot of its
queue frees here, or a lease after its last message, but never while its Celery queue
still holds a waiting message (a broker nobody consumes from does not fill up). A
publish that fails is tried again at the next look, and the outage is logged once
(broker.py). Sleeps and backoffs therefore hold no Celery task and use no `countdown`:
the run's wake time is in the database and the dispatcher publishes it when due. Every
worker process dispatches; a run published twice is claimed once. The runs a look finds
for one Celery queue go in batch messages, no more than there are live workers (batching.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cairn.celery.batching import (
    BATCH,
    BATCH_LIMIT,
    DEFAULT_QUEUE,
    SPREAD,
    STEP,
    Key,
    Message,
    batches,
    celery_queue,
    step_celery_queue,
)
from cairn.celery.broker import BrokerState
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.runtime.engine import Engine
from cairn.store.programs import claimable, step_tasks, workers

log = logcontext.logger("cairn.celery")

_LOOK = 500  # runs (and attempts) the dispatcher reads at a look

# Publishes messages (batching.py); raises if the broker may not have them all (those it
# has are then published again: a duplicate claims nothing).
Publish = Callable[[list[Message]], None]
Depth = Callable[[str], int]  # how many messages wait in a Celery queue


class Host:
    """An engine on a loop thread, taking the runs that messages name, and a dispatcher."""

    def __init__(
        self,
        make_engine: Callable[[], Engine],
        publish: Publish,
        *,
        dispatch: float,
        depth: Depth | None = None,
        connect: Callable[[], None] | None = None,
        probe_every: float = 10.0,
        health_file: str | None = None,
    ):
        self._make_engine, self._publish, self._depth = make_engine, publish, depth
        self._connect = connect  # opens the publishing connection (never raises)
        self.broker = BrokerState(health_file)
        # With nothing to publish, the dispatcher asks the broker something this often (an
        # outage is noticed, the health file kept fresh, while idle).
        self._probe_every = probe_every
        self._last_call = 0.0
        self.dispatch_interval = dispatch
        # Runs the engine executes at once: as many as Celery's pool has threads.
        self.concurrency = 8
        self.engine: Engine | None = None
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._started = False
        self._failure: Exception | None = None  # why the engine could not open
        # Reentrant: a second SIGTERM can run stop() again on the thread already inside it.
        self._stop_lock = threading.RLock()
        self._stopper: threading.Thread | None = None
        self._published: dict[Key, tuple[float, str]] = {}  # -> when (monotonic), queue
        # Celery queue -> attempts that ended here since the dispatcher's last look, and
        # messages whose claim took nothing (a queue limit, or a duplicate) (loop only).
        self._freed: dict[str, int] = {}
        self._refused: dict[str, int] = {}
        # Runs messages gave this worker, takes not ended (loop only); a cue to look now.
        self._held = 0
        self._hungry = asyncio.Event()
        # Live workers (this one too), counted at most once a second: a look's runs go in
        # no more messages than there are workers to share them.
        self._sharers, self._sharers_at = SPREAD, float("-inf")

    def start(self) -> None:
        """Open the engine (once) and start dispatching."""
        with self._lock:
            if self._started or self._stopper is not None:
                return  # stopping: nothing opens any more (the loop may have stopped)
            if self._failure is not None:  # once is enough: the worker is stopping
                raise self._failure
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="cairn-celery-loop", daemon=True
                )
                self._thread.start()
            try:
                self._call(self._open()).result()
            except Exception as exc:
                self._failure = exc
                raise
            self._started = True

    def _serving(self) -> bool:
        """Start (once) unless stopping: False once `stop` was called.

        A message Celery's pool starts as the worker shuts down (prefetched) is not taken:
        its run goes to another worker, like a message lost with its worker. Reopening
        the engine then would wait for ever on the stopped loop (and the shutdown too).
        """
        self.start()
        return self._started

    def _call(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _open(self) -> None:
        engine = self._make_engine()
        await engine.open()
        self.engine = engine
        self._dispatcher = asyncio.create_task(self._dispatch(), name="cairn-celery-dispatch")
        owner = engine.worker.env.owner if engine.worker else "?"
        log.info("cairn engine %s ready in this Celery worker", owner)

    def take(self, run_id: str, queue: str | None = None) -> bool:
        """Claim and execute `run_id` here; block until this attempt ends. False: not taken.

        With no free slot it waits for one (the message is acknowledged: its run is this worker's
        to take). `queue`: the Celery queue its message came from, whose slot frees as it ends.
        """
        if not self._serving():
            return False
        return bool(self._call(self._take(run_id, queue)).result())

    def take_batch(self, run_ids: list[str], queue: str | None = None) -> int:
        """Claim and execute `run_ids` here; block until all that were taken have ended.

        Ids beyond the free slots wait for one; those not taken (held elsewhere, finished, a
        queue limit, the worker stopping) count as refused messages do. Returns how many.
        """
        if not self._serving():
            return 0
        return int(self._call(self._take_batch(run_ids, queue)).result())

    async def _take_batch(self, run_ids: list[str], queue: str | None) -> int:
        # Every take ends before the Celery thread is let go (it holds their slots' place
        # among Celery's threads); the first failure, if any, is then the task's.
        ended = await asyncio.gather(
            *(self._take(run_id, queue) for run_id in run_ids), return_exceptions=True
        )
        for outcome in ended:
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(1 for outcome in ended if outcome is True)

    async def _take(self, run_id: str, queue: str | None) -> bool:
        # On the loop: its queue's slot count is kept as the attempt ends. With no free
        # slot it waits for one: its message is acknowledged, the run is this worker's.
        assert self.engine is not None and self.engine.worker is not None
        self._held += 1
        try:
            taken = await self.engine.worker.take(run_id, wait=True)
        finally:
            self._held -= 1
            if self._held in (0, self.concurrency, 2 * self.concurrency):
                # Down to two slots' worth of runs (their messages then arrive while the
                # runs in line execute), one, or none: runs stored meanwhile elsewhere, or
                # beyond the last look's limit, are published now, not at the next hint.
                self._hungry.set()
        if queue is not None:
            counts = self._freed if taken else self._refused
            counts[queue] = counts.get(queue, 0) + 1
        return taken

    @property
    def batch(self) -> int:
        """The most run ids this worker's dispatcher puts in one message.

        BATCH, or the worker's thread count if larger: a message costs its broker round
        trips whatever it names (on Redis a BRPOP, kombu's unacknowledged entry and the
        acknowledgement), and an idle worker like this one starts a whole message at once.
        """
        return min(BATCH_LIMIT, max(BATCH, self.concurrency))

    def take_step(self, task_id: str) -> bool:
        """Claim and execute step attempt `task_id` here; block until it is reported."""
        if not self._serving():
            return False
        assert self.engine is not None
        if self.engine.step_worker is None:
            return False  # this worker serves no step queue (its Celery queues say so too)
        return bool(self._call(self.engine.step_worker.take(task_id)).result())

    def stop(self, timeout: float = 60.0) -> threading.Thread:
        """Stop dispatching, close the engine (runs in flight are handed back) and the loop.

        In a thread of its own, returned: Celery calls this from its SIGTERM handler, on
        the main thread, which may be inside `start` (holding the lock, opening the
        engine); waiting there would never end. The thread is not a daemon: the process
        exits once the engine is closed.
        """
        with self._stop_lock:
            if self._stopper is None:
                # A stop() nested in this one (a second signal, before the assignment)
                # starts a second stopper; `_stop` runs once, the other returns.
                stopper = threading.Thread(
                    target=self._stop, args=(timeout,), name="cairn-celery-stop"
                )
                self._stopper = stopper
                stopper.start()
            return self._stopper

    def _stop(self, timeout: float) -> None:
        with self._lock:
            if not self._started:
                if self._thread is None:  # never started: nothing runs on the loop
                    self._loop.close()
                return
            self._started = False
        try:
            self._call(self._close()).result(timeout=timeout)
        except Exception as exc:  # one line: the process is stopping either way
            log.warning("cairn: closing the engine failed: %s", str(exc) or type(exc).__name__)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)
            if self._thread is None or not self._thread.is_alive():
                self._loop.close()  # its self-pipe sockets are closed now, not by the GC

    async def _close(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            try:
                await self._dispatcher
            except (asyncio.CancelledError, Exception):
                pass
        if self.engine is not None:
            await self.engine.close()

    async def _dispatch(self) -> None:
        engine = self.engine
        assert engine is not None and engine.worker is not None
        worker, store = engine.worker, engine.store
        if self._connect is not None:  # beside the looks: a slow broker holds up none
            asyncio.get_running_loop().run_in_executor(None, self._connect)
        while True:
            try:
                found = await store.read(
                    claimable.claimable_runs(
                        now=engine.clock.now(),
                        limit=_LOOK,
                        stale=worker.judges_heartbeats(),
                        workflows=worker.executes(),
                    )
                )
                steps = await store.read(step_tasks.claimable(limit=_LOOK))
                fresh, again = self._due(found, steps, engine.lease)
                if fresh or again:
                    if (began := time.monotonic()) - self._sharers_at >= 1.0:
                        self._sharers_at = began
                        self._sharers = max(1, await store.read(workers.live_workers()))
                    self._last_call = time.monotonic()
                    sent = await asyncio.to_thread(self._send, fresh, again)
                    now = time.monotonic()
                    for key, queue in sent:
                        self._published[key] = (now, queue)
                elif time.monotonic() - self._last_call >= self._probe_every:
                    self._last_call = time.monotonic()
                    await asyncio.to_thread(self._probe)
            except StoreError as exc:
                log.warning("cairn: the dispatcher cannot read the database: %s", exc)
            except Exception:
                log.exception("cairn: the dispatcher failed to publish; trying again")
            await self._wait_for_work(self.dispatch_interval)
            # The engine's requests loop waits for this hint too (runtime/claiming.py).
            worker.wake()

    async def _wait_for_work(self, timeout: float) -> None:
        # Until the store hints at new work, the engine runs low (`_take`), or `timeout`. While
        # every slot here is spoken for, hints are left for the line's shortening (`_take`):
        # what they announce could not start here sooner, every other worker's dispatcher
        # looks at them too, and each look reads every claimable run again.
        assert self.engine is not None
        if not self._hungry.is_set():
            waiters: set[asyncio.Future[object]] = {asyncio.ensure_future(self._hungry.wait())}
            if self._held < self.concurrency:
                waiters.add(asyncio.ensure_future(self.engine.store.wait_for_work(timeout)))
            try:
                await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        self._hungry.clear()

    def _due(
        self,
        found: list[tuple[str, str, str | None, float]],
        steps: list[tuple[str, str, int]],
        lease: float,
    ) -> tuple[list[tuple[Key, str]], dict[str, list[Key]]]:
        """What to publish: (key, Celery queue) never published, and again.

        `again`: per Celery queue, the keys to publish again if no message waits there
        (their last message is a lease old, or a slot of their queue freed here).
        """
        now = time.monotonic()
        claimable: list[tuple[Key, str]] = [
            ((run_id, status, mark), celery_queue(queue)) for run_id, status, queue, mark in found
        ]
        claimable += [
            ((task_id, STEP, float(claims)), step_celery_queue(queue))
            for task_id, queue, claims in steps
        ]
        if len(found) < _LOOK and len(steps) < _LOOK:  # a whole view: forget the rest
            keep = {key for key, _ in claimable}
            for key in [key for key in self._published if key not in keep]:
                del self._published[key]
        # A freed slot is worth a message only where a claim was refused: one per refusal.
        freed = {q: min(n, self._refused.get(q, 0)) for q, n in self._freed.items()}
        self._freed = {}
        fresh: list[tuple[Key, str]] = []
        again: dict[str, list[Key]] = {}
        for key, queue in claimable:
            if key not in self._published:
                fresh.append((key, queue))
            elif now - self._published[key][0] > lease:
                again.setdefault(queue, []).append(key)
            elif freed.get(queue, 0) > 0:
                freed[queue] -= 1  # one run per slot freed: the claim decides which
                self._refused[queue] -= 1
                again.setdefault(queue, []).append(key)
        waiting = {queue for key, queue in claimable if key in self._published}
        for queue in [queue for queue in self._refused if queue not in waiting]:
            del self._refused[queue]  # refused runs since taken or gone: nothing held back
        return fresh, again

    def _probe(self) -> None:
        """One round trip to the broker (in a thread), for BrokerState."""
        if self._depth is None:
            return
        try:
            self._depth(DEFAULT_QUEUE)
        except Exception as exc:
            self.broker.failed(exc, 0)
        else:
            self.broker.succeeded()

    def _send(
        self, fresh: list[tuple[Key, str]], again: dict[str, list[Key]]
    ) -> list[tuple[Key, str]]:
        """Publish (in a thread); what was published, or put off by a lease.

        Stops at the first broker error: the rest is tried at the next look.
        """
        sent: list[tuple[Key, str]] = []
        try:
            for queue, keys in again.items():
                if self._depth is not None and self._depth(queue) > 0:
                    # A message still waits there (its own, or one ahead of it): look
                    # again a lease from now rather than add to the queue.
                    sent += [(key, queue) for key in keys]
                    continue
                fresh = fresh + [(key, queue) for key in keys]
            if fresh:
                self._publish(batches(fresh, most=self.batch, spread=self._sharers))
                sent += fresh
        except Exception as exc:
            self.broker.failed(exc, len(fresh))
            return sent
        self.broker.succeeded()
        return sent
