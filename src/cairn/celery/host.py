"""Host: the cairn engine inside a Celery worker process, and its dispatcher.

The engine runs on an event loop in a thread of its own and never polls for runs
(`Engine(polls=False)`): a `cairn.run` task asks it to claim the run its message names
(`Worker.take`, with cairn's lease, fencing and liveness rules) and blocks its Celery slot
until that attempt of the run ends (it finishes, parks or is handed back).

The dispatcher, a task on the same loop, is what turns the database into messages: it
reads which runs a claim could take now (new, due after a sleep, a retry backoff or a
message, or left by a dead worker) and publishes each id once per state (again after a
lease, if no claim took it). Sleeps and backoffs therefore hold no Celery task and use no
`countdown`: the run's wake time is in the database and the dispatcher publishes it when
due. Every worker process dispatches; a run published twice is claimed once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.runtime.engine import Engine

log = logcontext.logger("cairn.celery")

# Celery queue of runs on no workflow queue; a run on workflow queue Q goes to "cairn.Q",
# an attempt sent to step queue S to "cairn.step.S".
DEFAULT_QUEUE = "cairn"
RUN = "run"
STEP = "step"


def celery_queue(queue: str | None) -> str:
    """The Celery queue a run's message goes to."""
    return DEFAULT_QUEUE if queue is None else f"{DEFAULT_QUEUE}.{queue}"


def step_celery_queue(queue: str) -> str:
    """The Celery queue of the attempts sent to step queue `queue`."""
    return f"{DEFAULT_QUEUE}.{STEP}.{queue}"


Publish = Callable[[str, str, str], None]  # (RUN or STEP, its id, Celery queue)


class Host:
    """An engine on a loop thread, taking the runs that messages name, and a dispatcher."""

    def __init__(self, make_engine: Callable[[], Engine], publish: Publish, *, dispatch: float):
        self._make_engine = make_engine
        self._publish = publish
        self.dispatch_interval = dispatch
        # Runs the engine executes at once: as many as Celery's pool has threads.
        self.concurrency = 8
        self.engine: Engine | None = None
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._started = False
        # (run id, status, mark) or (task id, STEP, claims) -> when published (monotonic).
        self._published: dict[tuple[str, str, float], float] = {}

    def start(self) -> None:
        """Open the engine (once) and start dispatching."""
        with self._lock:
            if self._started:
                return
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="cairn-celery-loop", daemon=True
            )
            self._thread.start()
            self._call(self._open()).result()
            self._started = True

    def _call(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _open(self) -> None:
        engine = self._make_engine()
        await engine.open()
        self.engine = engine
        self._dispatcher = asyncio.create_task(self._dispatch(), name="cairn-celery-dispatch")
        worker = engine.worker
        log.info("cairn engine %s ready in this Celery worker", worker.env.owner if worker else "?")

    def take(self, run_id: str) -> bool:
        """Claim and execute `run_id` here; block until this attempt ends. False: not taken."""
        self.start()
        assert self.engine is not None and self.engine.worker is not None
        return bool(self._call(self.engine.worker.take(run_id)).result())

    def take_step(self, task_id: str) -> bool:
        """Claim and execute step attempt `task_id` here; block until it is reported."""
        self.start()
        assert self.engine is not None
        if self.engine.step_worker is None:
            return False  # this worker serves no step queue (its Celery queues say so too)
        return bool(self._call(self.engine.step_worker.take(task_id)).result())

    def stop(self, timeout: float = 60.0) -> None:
        """Stop dispatching, close the engine (runs in flight are handed back) and the loop."""
        with self._lock:
            if not self._started:
                return
            self._started = False
        try:
            self._call(self._close()).result(timeout=timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)

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
        while True:
            try:
                found = await store.claimable_runs(
                    now=engine.clock.now(),
                    limit=500,
                    stale=worker.judges_heartbeats(),
                    workflows=worker.executes(),
                )
                steps = await store.claimable_step_tasks(limit=500)
                fresh = self._fresh(found, steps, engine.lease)
                if fresh:
                    await asyncio.to_thread(self._send, fresh)
            except StoreError as exc:
                log.warning("cairn: the dispatcher cannot read the database: %s", exc)
            except Exception:
                log.exception("cairn: the dispatcher failed to publish; trying again")
            await store.wait_for_work(self.dispatch_interval)

    def _fresh(
        self,
        found: list[tuple[str, str, str | None, float]],
        steps: list[tuple[str, str, int]],
        lease: float,
    ) -> list[tuple[str, str, str]]:
        """What to publish now: not yet in this state, or published over a lease ago."""
        now = time.monotonic()
        for key, at in list(self._published.items()):
            if now - at > lease:
                del self._published[key]
        fresh = []
        for run_id, status, queue, mark in found:
            key = (run_id, status, mark)
            if key not in self._published:
                self._published[key] = now
                fresh.append((RUN, run_id, celery_queue(queue)))
        for task_id, step_queue, claims in steps:
            key = (task_id, STEP, float(claims))
            if key not in self._published:
                self._published[key] = now
                fresh.append((STEP, task_id, step_celery_queue(step_queue)))
        return fresh

    def _send(self, messages: list[tuple[str, str, str]]) -> None:
        for kind, ident, queue in messages:
            self._publish(kind, ident, queue)
