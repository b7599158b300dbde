"""StepWorker: executes the step attempts sent to the step queues this process serves.

Runs park while a step of theirs executes on a queue (core/remote_steps.py). This loop
claims such attempts, executes each under a lease it renews every third of it, and
reports the outcome to the run in the transaction that closes the attempt. A worker that
dies stops renewing: once its lease has run out another worker of the queue claims the
attempt again, and only the latest claim may report. An attempt whose run ended (it was
cancelled, say) is stopped at the next renewal.

The step's code sees its run as it would where the run executes (core/queued_step.py):
`cairn.current_step()` with the same key, attempt and idempotency key, `current_run()`,
progress, columns, `check_cancelled()`; durable primitives are refused as in any step.

A sync step's thread that runs past its timeout cannot be stopped: the attempt is reported
(and so retried) only once that thread has returned, its claim renewed meanwhile, so
attempts of one step never overlap; its failure says how long it ran on. A step declared
with `isolation="process"` runs in a child process, killed at the timeout
(core/sync_steps.py, as where the run executes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import Any

from cairn import cancelling
from cairn.core import remote_steps, sync_steps
from cairn.core.failed_attempts import Failure, describe_failure
from cairn.core.queued_step import QueuedStepRun
from cairn.core.run_env import RunEnv
from cairn.core.signals import KeyMissing
from cairn.errors import KeyUnavailable, SerializationError, StoreError
from cairn.observability import logcontext
from cairn.observability.hooks import StepScope
from cairn.runtime import step_results
from cairn.runtime.keyless import KeylessRuns
from cairn.runtime.stop_window import StopWindow
from cairn.runtime.worker import HAND_BACK, HURRIED
from cairn.store.programs import runs as run_ops
from cairn.store.programs import step_tasks
from cairn.store.records import StepTaskRecord

log = logcontext.logger("cairn.step_worker")


def channel_of(task: StepTaskRecord) -> str:
    """The run's channel for this attempt (its execution is the task id's second part)."""
    execution = task.task_id[len(task.run_id) + 1 :].split("/", 1)[0]
    return remote_steps.channel(int(execution), task.key, task.attempt)


class StepWorker:
    """Claims and executes the attempts of `queues` (at most `concurrency` at once)."""

    def __init__(
        self,
        env: RunEnv,
        queues: list[str],
        *,
        lease: float,
        concurrency: int,
        poll_interval: float,
        polls: bool = True,
    ) -> None:
        self.env = env
        # False: claim an attempt only when told its id (`take`: a transport's message).
        self.polls = polls
        self.queues = list(queues)
        self.lease = lease
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        # Attempts executing now: task id -> (the claim, the asyncio task executing it).
        self.active: dict[str, tuple[StepTaskRecord, asyncio.Task[None]]] = {}
        # The thread of a timed-out sync attempt, by task id, until it has returned.
        self.overrunning: dict[str, concurrent.futures.Future[Any]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._slot_freed = asyncio.Event()
        self._stopping = False
        self._window = StopWindow(hand_back=HAND_BACK, hurried=HURRIED)
        # Attempts handed back for a key this worker lacks: left out of its claims a while.
        self.keyless = KeylessRuns()

    async def start(self) -> None:
        """Begin claiming (by polling, unless told ids by a transport)."""
        if self.polls:
            self._loop_task = asyncio.create_task(self._claim_loop(), name="cairn-step-worker")

    async def take(self, task_id: str) -> bool:
        """Claim attempt `task_id` and execute it here; wait until it is reported.

        What a transport's message leads to (cairn.celery): the claim applies the lease
        rules of any claim, so a duplicate message, or one for an attempt another worker
        holds or that was reported, takes nothing. Returns whether it took the attempt;
        False for one this worker handed back for a key it lacks, while its back-off lasts.
        """
        if self._stopping or len(self.active) >= self.concurrency:
            return False
        if self.keyless.backing_off(task_id, self.env.clock.now()):
            return False
        claimed = await self.env.store.write(
            step_tasks.claim(self.queues, self.env.owner, lease=self.lease, limit=1, only=task_id)
        )
        if not claimed:
            return False
        task = claimed[0]
        runner = asyncio.create_task(self._execute(task), name=f"cairn-step {task.task_id}")
        self.active[task.task_id] = (task, runner)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(runner)
        return True

    async def stop(self, *, grace: float = 0.0) -> None:
        """Stop claiming; let attempts finish for up to `grace`; hand the rest back.

        The hand-backs get HAND_BACK seconds (HURRIED after `hurry`, which also ends the
        grace): on a database that does not answer, an attempt not handed back by then is
        claimed again once its lease has run out, as after a crash.
        """
        self._stopping = True
        await self._cancel(self._loop_task)
        running = {task for _, task in self.active.values()}
        if running and grace > 0:
            await self._window.grace(set[asyncio.Future[Any]](running), grace)
        cut = [(record, task) for record, task in list(self.active.values()) if not task.done()]
        await cancelling.stop([task for _, task in cut])
        if not cut:
            return
        writes = (self.env.store.write(step_tasks.release(r)) for r, _ in cut)
        releases: asyncio.Future[Any] = asyncio.gather(*writes)
        await self._window.handing_back({releases})
        with contextlib.suppress(StoreError, TimeoutError):
            await cancelling.bounded(releases, 0.0)
            return
        log.warning(
            "stopped without handing %d step attempt(s) back (the database did not answer "
            "in time): they are claimed again once their lease has run out",
            len(cut),
        )

    def hurry(self) -> None:
        """End the grace of a `stop` in progress now; its hand-backs get HURRIED seconds."""
        self._window.hurry()

    async def abandon(self) -> None:
        """Stop without a word to the database, like a killed process (for testing)."""
        self._stopping = True
        await self._cancel(self._loop_task)
        for _, task in list(self.active.values()):
            await self._cancel(task)

    @staticmethod
    async def _cancel(task: asyncio.Task[Any] | None) -> None:
        if task is None or task.done():
            return
        await cancelling.stop([task])

    async def _claim_loop(self) -> None:
        store, owner = self.env.store, self.env.owner
        while not self._stopping:
            free = self.concurrency - len(self.active)
            claimed: list[StepTaskRecord] = []
            if free > 0:
                try:
                    skip = self.keyless.left_out(self.env.clock.now()) or ()
                    claimed = await store.write(
                        step_tasks.claim(
                            self.queues, owner, lease=self.lease, limit=free, skip=skip
                        )
                    )
                except StoreError as exc:
                    log.warning("cairn: claiming step attempts failed: %s", exc)
            for task in claimed:
                log.info(
                    "step %s attempt %d of run %s claimed from queue %s",
                    task.step,
                    task.attempt,
                    task.run_id,
                    task.queue,
                )
                runner = asyncio.create_task(self._execute(task), name=f"cairn-step {task.task_id}")
                self.active[task.task_id] = (task, runner)
            if claimed and len(self.active) < self.concurrency:
                continue  # there may be more waiting
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), self.poll_interval)

    async def _execute(self, task: StepTaskRecord) -> None:
        try:
            run = await self._run_of(task)
            step_run = QueuedStepRun(self.env, task, run)
            attempt = asyncio.create_task(self._reported(task, step_run))
            renewing = asyncio.create_task(self._renew(task, attempt, step_run))
            try:
                facts, payload = await attempt
                await step_run.flush()  # its progress and columns before the run goes on
            except asyncio.CancelledError:
                if self._stopping or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                # Taken over, or its run ended: nothing of it is reported.
                with contextlib.suppress(StoreError):
                    await self.env.store.write(step_tasks.drop(task, now=self.env.clock.now()))
                log.info("step %s of run %s stopped: its run ended", task.step, task.run_id)
                return
            except KeyMissing as lacking:
                # Its input is encrypted under a key this worker lacks: no fault of the
                # step. Handed back for a worker with the key, and left alone a while.
                with contextlib.suppress(StoreError):
                    await self.env.store.write(step_tasks.release(task))
                what = f"step {task.step!r} (attempt {task.attempt}) of run {task.run_id}"
                self.keyless.handed_back(
                    task.task_id, lacking, self.env.clock.now(), what=what, run=run
                )
                return
            finally:
                renewing.cancel()
            await self._report(task, facts, payload)
        finally:
            self.active.pop(task.task_id, None)
            self.overrunning.pop(task.task_id, None)
            self._slot_freed.set()

    async def _run_of(self, task: StepTaskRecord) -> Any:
        """The attempt's run as stored (what current_run() tells), retried while unreachable."""
        delay = 0.1
        while True:
            try:
                return await self.env.store.read(run_ops.get_run(task.run_id))
            except StoreError as exc:
                log.warning("cairn: reading the run of step attempt %s: %s", task.task_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _renew(
        self, task: StepTaskRecord, attempt: asyncio.Task[Any], step_run: QueuedStepRun
    ) -> None:
        """Renew the claim's lease until the attempt ends; cancel it if the claim is lost."""
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                held = await self.env.store.write(step_tasks.renew(task, lease=self.lease))
            except StoreError as exc:
                log.warning("cairn: renewing step attempt %s failed: %s", task.task_id, exc)
                continue
            if not held:
                step_run.stopped = True  # a sync step's thread sees it in check_cancelled()
                attempt.cancel()
                return

    async def _reported(
        self, task: StepTaskRecord, step_run: QueuedStepRun
    ) -> tuple[dict[str, Any], str]:
        """Execute the attempt; the facts of its outcome and the report's stored text.

        Both made under the claim (`_renew` goes on meanwhile): a wait for the blob store
        (a large result, or a report that is large itself) keeps the attempt held.
        """
        facts = await self._attempt(task, step_run)
        what = f"the report of step {task.step!r}"
        return facts, await step_results.dumps(self.env, task, facts, what)

    async def _attempt(self, task: StepTaskRecord, step_run: QueuedStepRun) -> dict[str, Any]:
        """Execute the attempt; the facts of its outcome, as the run's report takes them."""
        clock = self.env.clock
        started = clock.now()
        timed_out = ran_on = None
        limit: asyncio.Timeout | None = None
        try:
            fn, is_async, isolation = self._function(task)
            try:
                args, kwargs = await step_results.loads(self.env, task, task.input or "[[], {}]")
            except KeyUnavailable as exc:  # a BaseException: the attempt is handed back
                raise KeyMissing(exc.key_id, str(exc)) from None
            with step_run.entered():
                scope = self._observe(task, step_run)
                try:
                    if task.timeout is None:
                        value = await self._call(task, fn, is_async, isolation, args, kwargs)
                    else:
                        async with asyncio.timeout(task.timeout) as limit:
                            value = await self._call(task, fn, is_async, isolation, args, kwargs)
                except Exception as exc:
                    if scope is not None:
                        scope.failed(exc, limit is not None and limit.expired())
                    raise
                except BaseException:
                    if scope is not None:
                        scope.interrupted()
                    raise
                if scope is not None:
                    scope.succeeded()
            what = f"result of step {task.step!r}"
            result = await step_results.dumps(self.env, task, value, what)
        except SerializationError as exc:
            failure = describe_failure(exc, task.step, task.attempt, None)
            failure = Failure(**{**_fields(failure), "fatal": True})
            return self._facts(task, started, failure=failure)
        except Exception as exc:
            if limit is not None and limit.expired():
                timed_out = task.timeout
                # Reported (and retried) only once its thread has returned.
                ran_on = await sync_steps.outlived(self.overrunning, task.task_id)
            failure = describe_failure(exc, task.step, task.attempt, timed_out, ran_on)
            return self._facts(task, started, failure=failure)
        return self._facts(task, started, result=result)

    def _observe(self, task: StepTaskRecord, step_run: QueuedStepRun) -> StepScope | None:
        """The metrics' and spans' scope of the attempt (None: not observed, or run gone)."""
        observer, run = self.env.observer, step_run.run
        if observer is None or run is None:
            return None
        return observer.queued_step(
            run, task.key, task.step, task.attempt, task.queue, sent_in=task.trace_context
        )

    def _facts(
        self,
        task: StepTaskRecord,
        started: float,
        *,
        result: str | None = None,
        failure: Failure | None = None,
    ) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "ok": failure is None,
            "queue": task.queue,
            "worker": self.env.owner,
            "claims": task.claims,
            "started": started,
            "finished": self.env.clock.now(),
        }
        if failure is None:
            facts["result"] = result
        else:
            facts["failure"] = failure.to_json()
        return facts

    def _function(self, task: StepTaskRecord) -> tuple[Any, bool, str]:
        """The step's function, whether it is a coroutine function, and its isolation."""
        if task.target is not None:
            fn = remote_steps.resolve_target(task.target)
            return fn, asyncio.iscoroutinefunction(fn), "thread"
        step = self.env.registry.steps.get(task.step)
        if step is None:
            raise LookupError(
                f"step {task.step!r} is not registered on worker {self.env.owner} "
                f"(serving step queue {task.queue!r}): import the module that declares it"
            )
        return step.fn, step.is_async, step.isolation

    async def _call(
        self,
        task: StepTaskRecord,
        fn: Any,
        is_async: bool,
        isolation: str,
        args: list[Any],
        kwargs: dict[str, Any],
    ) -> Any:
        if is_async:
            return await fn(*args, **kwargs)
        return await sync_steps.call(
            self.env.threads,
            f"step {task.step!r}",
            fn,
            args,
            kwargs,
            isolation=isolation,
            overrunning=self.overrunning,
            key=task.task_id,
        )

    async def _report(self, task: StepTaskRecord, facts: dict[str, Any], payload: str) -> None:
        """Send the outcome to the run, retrying the database until it answers or we stop."""
        delay = 0.1
        while True:
            try:
                sent = await self.env.store.write(
                    step_tasks.report(task, channel_of(task), payload, now=self.env.clock.now())
                )
                break
            except StoreError as exc:
                log.warning("cairn: reporting step attempt %s failed: %s", task.task_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        log.info(
            "step %s attempt %d of run %s %s%s",
            task.step,
            task.attempt,
            task.run_id,
            "completed" if facts["ok"] else "failed",
            "" if sent else " (not reported: another worker holds it now)",
        )


def _fields(failure: Failure) -> dict[str, Any]:
    return {name: getattr(failure, name) for name in Failure.__dataclass_fields__}
