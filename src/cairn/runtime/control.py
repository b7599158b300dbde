"""RunControl: the one implementation of start/get/list/history behind Engine, Client and CLI."""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from cairn import arguments, durations, ids
from cairn.authoring.registry import Registry
from cairn.authoring.workflow import WorkflowDef, definition_of
from cairn.clock import Clock
from cairn.core.executor import Outcome
from cairn.errors import (
    InvalidArguments,
    InvalidName,
    PoisonRun,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunNotFound,
    TransientWorkflow,
    UnknownWorkflow,
)
from cairn.models import EventDelivery, History, RunPage, RunStatus, RunSummary, parse_origin
from cairn.names import check_name
from cairn.observability import propagation
from cairn.runtime import blocking, hooks, transient, triggers, workflow_names
from cairn.runtime import history as run_history
from cairn.runtime.handle import RunHandle
from cairn.runtime.queues import QueueControl
from cairn.runtime.schedules import ScheduleControl
from cairn.runtime.tasks import TaskControl
from cairn.serialization import Serializer
from cairn.store.protocol import Store
from cairn.store.records import RunQuery, RunRecord


@dataclass(slots=True)  # not frozen: one per run started here; treat as read-only
class Reservation:
    """A slot held for a run started in this process.

    `owner` is stored with the run; `epoch` is the worker's tenure epoch before the run
    was stored (see core/tenure.py).
    """

    owner: str
    epoch: int


class LocalExecutor(Protocol):
    """A worker in this process that can execute a run the moment it is started."""

    def reserve(self) -> Reservation | None:
        """Hold a slot for a run about to be stored; None if full or stopping."""
        ...

    def release(self, reservation: Reservation) -> None:
        """Give back a slot reserved for a run that was not created."""
        ...

    def launch(self, run: RunRecord, reservation: Reservation) -> None:
        """Execute a run stored with a reserved slot."""
        ...

    def wake(self) -> None:
        """Look for claimable runs now (a waiting run just received a message)."""
        ...

    def deliver(self, run_id: str, control: str | None) -> None:
        """Pass a cancel/pause/resume request to a run executing in this process."""
        ...

    def executing(self, run_id: str) -> bool:
        """True while the run executes in this process (its end will be announced here)."""
        ...


# A chain of continue_as_new runs an event follows to its newest run, at most.
_MAX_CHAIN_HOPS = 10_000


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class RunControl:
    """Start, inspect and wait for runs through a Store."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        serializer: Serializer,
        registry: Registry,
        local: LocalExecutor | None = None,
        known_window: float = workflow_names.DEFAULT_WINDOW,
        ephemeral: bool = False,
    ) -> None:
        self.store = store
        # True for the engine of transient runs (runtime/transient.py): its store is in
        # memory, so it stores them. Elsewhere a transient workflow's start is refused.
        self.ephemeral = ephemeral
        self.clock = clock
        self.serializer = serializer
        self.registry = registry
        self.local = local
        self.names = workflow_names.WorkflowNames(store, registry, window=known_window)
        self.tasks = TaskControl(self)
        self.queues = QueueControl(self)
        self.schedules = ScheduleControl(self)
        self._waiters: dict[str, list[asyncio.Future[Outcome | None]]] = {}

    # starting

    async def start(
        self,
        workflow: WorkflowDef[Any, Any] | str | Any,
        *args: Any,
        run_id: str | None = None,
        queue: Any = None,
        priority: int = 0,
        dedup_key: str | None = None,
        delay: Any = None,
        run_at: datetime | None = None,
        partition: str | None = None,
        parent_id: str | None = None,
        allow_unknown: bool = False,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run of `workflow`; an existing `run_id` returns that run instead.

        `delay` (a duration, or a datetime) or `run_at` (a datetime; pyworkflow's word)
        holds the run back until then; a naive datetime is taken as UTC.

        The arguments are checked against the workflow's signature and converted to its
        annotated types (when this process imports it) before anything is stored.

        Raises:
            UnknownWorkflow: a name neither this process nor a worker seen lately knows,
                unless `allow_unknown`.
            InvalidArguments: arguments that do not fit the workflow (a TypeError).
            TransientWorkflow: `workflow` is transient (durable=False): only an Engine
                executes it, on its private in-memory store (`Engine.start`).
        """
        defn = self._definition(workflow)
        if defn is not None and not defn.durable:
            if queue is not None:
                transient.refuse_queue(defn, queue)
            if not self.ephemeral:
                raise TransientWorkflow(defn.name, transient.NOT_FOR_WORKERS)
        name = defn.name if defn is not None else check_name(str(workflow), "workflow name")
        if run_id is not None:
            check_name(run_id, "run_id")
        try:
            if defn is not None:
                args, kwargs = arguments.fit(
                    defn.fn, args, kwargs, workflow=name, reserved=START_OPTIONS
                )
            elif not allow_unknown:
                await self.names.check(name)
        except (InvalidArguments, UnknownWorkflow):
            if run_id is not None and await self.store.get_run(run_id) is not None:
                return RunHandle(self, run_id)  # that run, whatever the arguments
            raise
        args_text = self.serializer.dumps(
            {"args": list(args), "kwargs": kwargs}, what=f"arguments of workflow {name!r}"
        )
        now = self.clock.now()
        wake_at = _start_at(now, delay, run_at)
        queue_name = getattr(queue, "name", queue)
        if queue_name is None and defn is not None:
            queue_name = defn.queue
        record = RunRecord(
            run_id=run_id or ids.new_run_id(),
            workflow=name,
            status=RunStatus.PENDING.value,
            args=args_text,
            created_at=now,
            updated_at=now,
            max_recoveries=defn.max_recoveries if defn is not None else 8,
            wake_at=wake_at,
            parent_id=parent_id,
            queue=queue_name,
            priority=priority,
            dedup_key=dedup_key,
            partition_key=partition,
            version=defn.version if defn is not None else None,
            trace_context=propagation.current(),
            origin="parent" if parent_id is not None else "api",
        )
        # Only a workflow this process imports can execute here; one started by a name it
        # does not know is queued for a worker that does.
        local = self.local if wake_at is None and queue_name is None and defn else None
        slot = local.reserve() if local is not None else None
        if slot is not None:
            # Fast path: this process executes the run now, with no claim round trip.
            record.status = RunStatus.RUNNING.value
            record.owner = slot.owner
            record.attempt = 1
            record.started_at = now
            record.fence = 1  # the run's first claim
        try:
            stored, created = await self.store.create_run(record)
        except BaseException:
            # If the insert committed and only its reply was lost, the run is held by this
            # worker and the reconciler resumes it at the next heartbeats.
            if slot is not None and local is not None:
                local.release(slot)
            raise
        if not created and slot is not None and _same_start(stored, record):
            created = True  # our own insert, sent again after its reply was lost
        if local is not None and slot is not None:
            if created:
                local.launch(stored, slot)
            else:
                local.release(slot)
        elif created:
            self.wake_local()  # queued or delayed: let this process's worker look now
        if created and defn is None:  # queued under a name this process does not know
            await self.names.warn_if_no_live_worker(name, stored.run_id)
        return RunHandle(self, stored.run_id)

    def _definition(self, workflow: Any) -> WorkflowDef[Any, Any] | None:
        found = definition_of(workflow)
        if found is not None:
            return found
        if isinstance(workflow, str) and workflow:
            return self.registry.workflows.get(workflow)
        raise TypeError(f"expected a @cairn.workflow or a workflow name, got {workflow!r}")

    # messages

    def wake_local(self) -> None:
        """Let this process's worker pick up a run that just became due."""
        if self.local is not None:
            self.local.wake()

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, idempotency_key: str | None = None
    ) -> EventDelivery:
        """Queue event `name` for the run; it is consumed by the run's next wait for it.

        A run that continued as new passes the event on to the newest run of its chain.
        Only a wait for `name` wakes the run: sent while it waits for something else, the
        event is kept for a later wait, and the answer says so (`EventDelivery.note`).

        Raises:
            RunNotFound: no run has that id.
            RunFinished: the run (the newest of its chain) has already finished.
        """
        check_name(name, "event name")
        _storable(run_id)
        text = self.serializer.dumps(payload, what=f"payload of event {name!r}")
        for _ in range(_MAX_CHAIN_HOPS):
            delivery = await self.store.send_message(
                run_id, f"event:{name}", text, idempotency_key=idempotency_key, now=self.clock.now()
            )
            if delivery is None:
                raise RunNotFound(run_id)
            status = RunStatus(delivery.status)
            if status is RunStatus.CONTINUED:
                successor = (await self.record(run_id)).continued_to
                if successor:
                    run_id = successor  # nothing was queued on the ended run: follow the chain
                    continue
            if status.finished:
                raise RunFinished(run_id, status.value)
            if delivery.woken:
                self.wake_local()
            waits = blocking.channels_in_words(delivery.waits_on or ())
            return EventDelivery(run_id, name, status, delivery.woken, waits)
        raise RunFinished(run_id, RunStatus.CONTINUED.value)

    async def emit(
        self, event_type: str, payload: Any = None, *, key: str | None = None
    ) -> list[RunHandle]:
        """Start the workflows subscribed to `event_type` (see `runtime.triggers.emit`)."""
        return await triggers.emit(self, event_type, payload, key=key)

    async def resume_hook(self, token: str, payload: Any = None) -> str:
        """Call a hook once; returns the run id it resumed (see `runtime.hooks.resume`)."""
        return await hooks.resume(self, token, payload)

    # operator control

    async def _control(self, run_id: str, action: str) -> RunStatus:
        _storable(run_id)
        status = await self.store.control_run(run_id, action, now=self.clock.now())
        if status is None:
            raise RunNotFound(run_id)
        if self.local is not None:
            self.local.deliver(run_id, None if action == "resume" else action)
            self.local.wake()
        if RunStatus(status).finished:
            self.notify_finished(run_id)
        return RunStatus(status)

    async def cancel(self, run_id: str) -> RunStatus:
        """Cancel a run; it ends CANCELLED.

        Cancelled is delivered at its current or next durable point (at once if it
        sleeps or waits). A finished run is unchanged. Returns the status right after.
        """
        return await self._control(run_id, "cancel")

    async def pause(self, run_id: str) -> RunStatus:
        """Pause a run at its next durable point (at once if it sleeps, waits or is queued)."""
        return await self._control(run_id, "pause")

    async def resume(self, run_id: str) -> RunStatus:
        """Resume a paused run; timers and events that came meanwhile are honoured."""
        return await self._control(run_id, "resume")

    async def retry(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Continue a FAILED run from its failed step; completed steps do not run again.

        The run's next execution begins; `by` (who asked) is recorded with it. The failed
        entry and every attempt of the earlier executions stay in the history.

        Raises:
            RunNotFound: unknown run.
            RunFinished: the run is not FAILED.
            InvalidName: `by` is not a storable name.
        """
        by = _who(by)
        run = await self.record(run_id)
        if not await self.store.retry_run(run_id, now=self.clock.now(), by=by):
            raise RunFinished(run_id, f"{run.status}; only FAILED runs can be retried")
        self.wake_local()
        return RunHandle(self, run_id)

    async def restart(self, run_id: str, *, by: str | None = None) -> RunHandle:
        """Start a new run of the same workflow with the same input.

        The new run records that it restarts `run_id`, and who asked (`by`).
        """
        by = _who(by)
        run = await self.record(run_id)
        return await self._copy(run, before_seq=None, by=by, origin="restart")

    async def fork(self, run_id: str, from_step: int, *, by: str | None = None) -> RunHandle:
        """Start a new run reusing the recorded outcomes before history entry `from_step`.

        The new run records that it forks `run_id` at `from_step`, and who asked (`by`).
        """
        if not isinstance(from_step, int) or from_step < 1:
            raise ValueError(f"from_step must be a history seq (1 or more), got {from_step!r}")
        by = _who(by)
        run = await self.record(run_id)
        return await self._copy(run, before_seq=from_step, by=by, origin="fork")

    async def _copy(
        self, run: RunRecord, *, before_seq: int | None, by: str | None, origin: str
    ) -> RunHandle:
        now = self.clock.now()
        copy = RunRecord(
            run_id=ids.new_run_id(),
            workflow=run.workflow,
            status=RunStatus.PENDING.value,
            args=run.args,
            created_at=now,
            updated_at=now,
            max_recoveries=run.max_recoveries,
            queue=run.queue,
            priority=run.priority,
            partition_key=run.partition_key,
            trace_context=propagation.current(),
            restarted_from=run.run_id if before_seq is None else None,
            forked_from=run.run_id if before_seq is not None else None,
            forked_from_seq=before_seq,
            origin=origin,
        )
        await self.store.copy_run(copy, run.run_id, before_seq=before_seq, by=by, now=now)
        self.wake_local()
        return RunHandle(self, copy.run_id)

    # reading

    async def record(self, run_id: str) -> RunRecord:
        """The stored run; RunNotFound if unknown."""
        _storable(run_id)
        run = await self.store.get_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def get(self, run_id: str) -> RunHandle:
        """A handle on an existing run; RunNotFound if unknown."""
        await self.record(run_id)
        return RunHandle(self, run_id)

    async def describe(self, run_id: str) -> RunSummary:
        """The run's summary (status, version, chain links, what it waits for)."""
        return summary(await self.record(run_id), now=self.clock.now())

    async def status(self, run_id: str) -> RunStatus:
        """The run's status."""
        return RunStatus((await self.record(run_id)).status)

    async def list_runs(
        self,
        status: RunStatus | str | None = None,
        workflow: WorkflowDef[Any, Any] | str | None = None,
        columns: dict[str, Any] | None = None,
        since: datetime | float | None = None,
        limit: int = 100,
        cursor: str | None = None,
        version: str | None = None,
        *,
        until: datetime | float | None = None,
        origin: str | None = None,
        run_id_prefix: str | None = None,
    ) -> RunPage:
        """A page of runs, newest first.

        `since` / `until` bound the creation time (`until` excluded), `origin` is what
        started the runs (one of `models.ORIGINS`, or "unknown" for runs from before
        cairn recorded it), `run_id_prefix` keeps the runs whose id starts with it.
        """
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        query = _query(
            status=status,
            workflow=workflow,
            columns=columns,
            since=since,
            until=until,
            version=version,
            origin=origin,
            run_id_prefix=run_id_prefix,
            limit=limit + 1,
            cursor=_parse_cursor(cursor),
        )
        rows = await self.store.list_runs(query)
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = f"{rows[-1].created_at!r}|{rows[-1].run_id}" if more else None
        now = self.clock.now()
        return RunPage([summary(row, now=now) for row in rows], next_cursor)

    async def count_runs(
        self,
        workflow: WorkflowDef[Any, Any] | str | None = None,
        columns: dict[str, Any] | None = None,
        since: datetime | float | None = None,
        version: str | None = None,
        *,
        until: datetime | float | None = None,
        origin: str | None = None,
        run_id_prefix: str | None = None,
        limit: int | None = None,
    ) -> dict[RunStatus, int]:
        """How many runs `list_runs` with these filters finds in each status (one read).

        Every status is a key, 0 when no run has it. With `limit` and no filter, each
        status is counted up to `limit` (a count of `limit` is a lower bound); with
        filters, at most `limit` runs are counted in all: when the counts add up to
        `limit`, each is a lower bound. Either way the read is bounded by `limit`.
        """
        query = _query(
            workflow=workflow,
            columns=columns,
            since=since,
            until=until,
            version=version,
            origin=origin,
            run_id_prefix=run_id_prefix,
        )
        found = await self.store.count_runs(query, limit)
        return {status: found.get(status.value, 0) for status in RunStatus}

    async def history(self, run_id: str, *, after: int = 0, limit: int | None = None) -> History:
        """Every durable operation of the run, of every execution, in the order they happened.

        Entries a retry ran again stay, marked `superseded`; `History.executions` says
        who began each execution and when (see runtime/history.py). With `limit`, one
        page of at most `limit` entries after history entry `after` (its seq), and
        `History.next_after` the `after` of the next page (None on the last).
        """
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        if after < 0:
            raise ValueError(f"after must be a history entry number (0 or more), got {after!r}")
        run = await self.record(run_id)
        try:
            payload = self.serializer.loads(run.args)
            args, kwargs = tuple(payload.get("args", ())), dict(payload.get("kwargs", {}))
        except Exception:  # an argument type that cannot be restored here
            args, kwargs = (), {}
        return await run_history.history(
            self.store,
            run,
            self._stored,
            args,
            kwargs,
            now=self.clock.now(),
            after_seq=after,
            limit=limit,
        )

    def _stored(self, text: str | None) -> Any:
        """A stored value for people to read: its text when it cannot be restored here."""
        if text is None:
            return None
        try:
            return self.serializer.loads(text)
        except Exception:  # a type this process cannot import, say
            return text

    async def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """Every failed or interrupted step attempt of the run, by execution.

        Each names its `execution` and `outcome` ("failed", or "interrupted" with the
        `worker` that ran it). `started_at` and `duration` (seconds to `failed_at`) are
        None for attempts recorded before cairn kept when each began.
        """
        return [run_history.attempt_dict(a) for a in await self.store.load_attempts(run_id)]

    async def executing(self, run_id: str) -> list[dict[str, Any]]:
        """The step attempts executing for the run now (see runtime/history.executing)."""
        return await run_history.executing(self.store, await self.record(run_id))

    async def copies(self, run_id: str) -> list[dict[str, Any]]:
        """The runs restarted or forked from this one, oldest first."""
        await self.record(run_id)
        return await run_history.copies(self.store, run_id)

    # waiting

    def notify_finished(self, run_id: str, ended: Outcome | None = None) -> None:
        """Wake local waiters of `run_id` (called by the worker when a run stops).

        `ended` is how the run ended, as committed by this process's worker: waiters of a
        finished run then answer without reading it back.
        """
        for future in self._waiters.pop(run_id, ()):
            if not future.done():
                future.set_result(ended)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunRecord:
        """Wait until the run is finished; local completions wake at once, others by polling."""
        ended = await self._wait(run_id, timeout)
        return await self.record(run_id) if isinstance(ended, Outcome) else ended

    async def _wait(self, run_id: str, timeout: float | None) -> RunRecord | Outcome:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        delay = 0.01
        while True:
            future: asyncio.Future[Outcome | None] = loop.create_future()
            self._waiters.setdefault(run_id, []).append(future)
            # A run executing here announces its end here: no need to ask the database.
            local = self.local is not None and self.local.executing(run_id)
            if not local:
                run = await self.record(run_id)
                if RunStatus(run.status).finished:
                    self._discard(run_id, future)
                    return run
            wait_for: float | None = None if local else delay
            if deadline is not None:
                left = deadline - loop.time()
                wait_for = left if wait_for is None else min(wait_for, left)
                if wait_for <= 0:
                    self._discard(run_id, future)
                    raise TimeoutError(f"run {run_id!r} did not finish within {timeout}s")
            try:
                async with asyncio.timeout(wait_for):
                    ended = await future
                if ended is not None and _final(ended):
                    return ended
            except TimeoutError:
                self._discard(run_id, future)
            if not local:
                delay = min(delay * 2, 0.5)

    def _discard(self, run_id: str, future: asyncio.Future[Outcome | None]) -> None:
        waiters = self._waiters.get(run_id)
        if waiters and future in waiters:
            waiters.remove(future)
            if not waiters:
                del self._waiters[run_id]

    async def result(self, run_id: str, *, timeout: float | None = None) -> Any:
        """The run's result once finished; RunFailed / RunCancelled otherwise."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            run = await self._wait(run_id, timeout=left)
            if isinstance(run, Outcome):
                return self._answer(run_id, run.status, run.result, run.error)
            if run.status != RunStatus.CONTINUED.value or run.continued_to is None:
                return self.outcome(run)
            run_id = run.continued_to  # the chain's final result is the answer

    def outcome(self, run: RunRecord) -> Any:
        """The result of a finished run, or the error it ended with, raised."""
        return self._answer(run.run_id, run.status, run.result, run.error)

    def _answer(
        self, run_id: str, status: str | None, result: str | None, error: str | None
    ) -> Any:
        if status == RunStatus.COMPLETED.value:
            return None if result is None else self.serializer.loads(result)
        if status == RunStatus.CANCELLED.value:
            raise RunCancelled(run_id=run_id)
        data = _json(error) or {}
        kind = PoisonRun if data.get("type") == "cairn.errors.PoisonRun" else RunFailed
        raise kind(
            f"run {run_id!r} failed: {data.get('message', '')}",
            run_id=run_id,
            error_type=data.get("cause_type") or data.get("type", ""),
            error_message=data.get("message", ""),
            traceback=data.get("traceback", ""),
        )


def _workflow_name(workflow: Any) -> Any:
    """A filter's workflow: a name, or the name of a definition (a @cairn.workflow...)."""
    found = definition_of(workflow)
    return workflow if found is None else found.name


def _start_at(now: float, delay: Any, run_at: datetime | None) -> float | None:
    """When a run may start: None for now, else a time (`delay` or `run_at`)."""
    if run_at is not None:
        if delay is not None:
            raise ValueError("engine.start got both delay= and run_at=; give one")
        if not isinstance(run_at, datetime):
            raise TypeError(f"run_at must be a datetime, got {run_at!r} (delay= takes a duration)")
        delay = run_at
    if delay is None:
        return None
    if isinstance(delay, datetime):
        when = delay if delay.tzinfo is not None else delay.replace(tzinfo=UTC)
        return when.timestamp()
    return now + durations.parse(delay, what="start delay").total_seconds()


# The keyword options of `start` (run_id, queue, ...): not arguments of the workflow.
START_OPTIONS = frozenset(
    name
    for name, param in inspect.signature(RunControl.start).parameters.items()
    if param.kind is inspect.Parameter.KEYWORD_ONLY
)


def _storable(run_id: str) -> None:
    """RunNotFound for an id no run can have (a NUL, say), before the store refuses it."""
    try:
        check_name(run_id, "run id")
    except InvalidName:
        raise RunNotFound(run_id) from None


def _same_start(stored: RunRecord, sent: RunRecord) -> bool:
    """True if `stored` is the run `sent` itself (not another start of the same id)."""
    return (stored.owner, stored.fence, stored.created_at, stored.args) == (
        sent.owner,
        sent.fence,
        sent.created_at,
        sent.args,
    )


def _final(ended: Outcome) -> bool:
    """True if how a run ended, as its worker committed it, alone answers `result()`."""
    if ended.status == RunStatus.FAILED.value:
        return ended.error is not None  # a poisoned run's error is only in the database
    # A continued run's answer is its successor's.
    return ended.status in (RunStatus.COMPLETED.value, RunStatus.CANCELLED.value)


def summary(run: RunRecord, *, now: float) -> RunSummary:
    """The public summary of a stored run (`now` dates what it waits for)."""
    return RunSummary(
        run_id=run.run_id,
        workflow=run.workflow,
        status=RunStatus(run.status),
        created_at=datetime.fromtimestamp(run.created_at, UTC),
        updated_at=datetime.fromtimestamp(run.updated_at, UTC),
        columns=_json(run.columns) or {},
        progress=_json(run.progress),
        parent_id=run.parent_id,
        queue=run.queue,
        error=_json(run.error),
        version=run.version,
        waiting_for=blocking.reason(run, now=now),
        continued_from=run.continued_from,
        continued_to=run.continued_to,
        started_at=_dt(run.started_at),
        execution=run.execution,
        restarted_from=run.restarted_from,
        forked_from=run.forked_from,
        forked_from_seq=run.forked_from_seq,
        origin=run.origin,
        futile_wakes=run.futile_wakes,
    )


def _query(
    *,
    status: RunStatus | str | None = None,
    workflow: WorkflowDef[Any, Any] | str | None = None,
    columns: dict[str, Any] | None = None,
    since: datetime | float | None = None,
    until: datetime | float | None = None,
    version: str | None = None,
    origin: str | None = None,
    run_id_prefix: str | None = None,
    limit: int = 100,
    cursor: tuple[float, str] | None = None,
) -> RunQuery:
    """The store's query for `list_runs` / `count_runs` filters; ValueError names a bad one."""
    if run_id_prefix is not None:
        check_name(run_id_prefix, "run id prefix")
    return RunQuery(
        status=None if status is None else RunStatus.parse(status).value,
        workflow=_workflow_name(workflow),
        columns={k: json.dumps(v, sort_keys=True) for k, v in (columns or {}).items()},
        since=since.timestamp() if isinstance(since, datetime) else since,
        until=until.timestamp() if isinstance(until, datetime) else until,
        version=version,
        origin=None if origin is None else parse_origin(origin),
        run_id_prefix=run_id_prefix,
        limit=limit,
        cursor=cursor,
    )


def _who(by: str | None) -> str | None:
    """`by` checked: None, or a name (at most 255 characters) of who asked."""
    return None if by is None else check_name(by, "by")


def _parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    if cursor is None:
        return None
    created, sep, run_id = cursor.partition("|")
    try:
        if not sep:
            raise ValueError
        return float(created), run_id
    except ValueError:
        raise ValueError(f"invalid cursor {cursor!r} (pass back RunPage.next_cursor)") from None
