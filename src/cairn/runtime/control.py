"""RunControl: the one implementation of start/get/list/history behind Engine, Client and CLI.

RunControl is the hub; it holds one object per concern, each made here with what it uses:
a RunReader (runtime/run_reading.py: a run's record, history, lists), a RunWaiter
(runtime/run_waiting.py: wait and result, woken by this process's worker) and RunVerbs
(runtime/run_verbs.py: cancel, pause, resume, retry, restart, fork, send_event). Their
methods are RunControl's surface, bound by name in `__init__`. Starting runs, handles
and the verbs that need the whole RunControl are here.
"""

from __future__ import annotations

import inspect
from datetime import date, datetime
from typing import Any

from cairn import arguments, blobs, ids, start_times
from cairn.authoring.definitions import WorkflowDef, definition_of
from cairn.authoring.registry import Registry
from cairn.clock import Clock
from cairn.errors import InvalidArguments, InvalidValue, TransientWorkflow, UnknownWorkflow
from cairn.models import RunStatus
from cairn.names import check_name, check_queue_name
from cairn.observability import propagation
from cairn.runtime import hooks, transient_rules, triggers, workflow_names
from cairn.runtime.handle import RunHandle
from cairn.runtime.local_executor import LocalExecutor
from cairn.runtime.queues import QueueControl
from cairn.runtime.run_reading import RunReader
from cairn.runtime.run_verbs import RunVerbs
from cairn.runtime.run_waiting import RunWaiter
from cairn.runtime.schedules import ScheduleControl
from cairn.runtime.tasks import TaskControl
from cairn.serialization import Serializer
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import Store
from cairn.store.records import RunRecord


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
        self.names = workflow_names.WorkflowNames(store, registry, window=known_window)
        self.tasks = TaskControl(self)
        self.queues = QueueControl(self)
        self.schedules = ScheduleControl(self)
        reader = RunReader(store, clock=clock, serializer=serializer)
        self._waiter = waiter = RunWaiter(reader, serializer=serializer, local=local)
        verbs = RunVerbs(
            store,
            clock=clock,
            serializer=serializer,
            reader=reader,
            waiter=waiter,
            handles=self,
        )
        # The surface Engine, Client, the CLI and the API call, each from its one owner.
        self.record = reader.record
        self.describe = reader.describe
        self.status = reader.status
        self.list_runs = reader.list_runs
        self.count_runs = reader.count_runs
        self.history = reader.history
        self.attempts = reader.attempts
        self.executing = reader.executing
        self.copies = reader.copies
        self.wake_local = waiter.wake_local
        self.notify_finished = waiter.notify_finished
        self.wait = waiter.wait
        self.result = waiter.result
        self.outcome = waiter.outcome
        self.send_event = verbs.send_event
        self.cancel = verbs.cancel
        self.pause = verbs.pause
        self.resume = verbs.resume
        self.retry = verbs.retry
        self.restart = verbs.restart
        self.fork = verbs.fork

    @property
    def local(self) -> LocalExecutor | None:
        """This process's worker, if it executes runs (the Engine sets it once it has one)."""
        return self._waiter.local

    @local.setter
    def local(self, worker: LocalExecutor | None) -> None:
        self._waiter.local = worker

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
        run_at: datetime | date | str | None = None,
        partition: str | None = None,
        parent_id: str | None = None,
        allow_unknown: bool = False,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run of `workflow`; an existing `run_id` returns that run instead.

        `delay` (a duration, or a datetime) or `run_at` (pyworkflow's word: a datetime, a
        date, or ISO 8601 text such as "2026-01-01" or "2026-01-01T09:30:00+01:00") holds
        the run back until then; a date means its midnight UTC, a naive time is UTC.

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
                transient_rules.refuse_queue(defn, queue)
            if not self.ephemeral:
                raise TransientWorkflow(defn.name, transient_rules.NOT_FOR_WORKERS)
        name = defn.name if defn is not None else check_name(str(workflow), "workflow name")
        queue_name = _start_names(run_id, queue, dedup_key, partition, priority)
        try:
            if defn is not None:
                args, kwargs = arguments.fit(
                    defn.fn, args, kwargs, workflow=name, reserved=START_OPTIONS
                )
            elif not allow_unknown:
                await self.names.check(name)
        except (InvalidArguments, UnknownWorkflow):
            if run_id is not None and await self.store.read(run_ops.get_run(run_id)) is not None:
                return RunHandle(self, run_id)  # that run, whatever the arguments
            raise
        args_text = await blobs.dumps_async(
            self.serializer,
            {"args": list(args), "kwargs": kwargs},
            what=f"arguments of workflow {name!r}",
        )
        # A name this process does not import: what its workers declare (queue, recoveries).
        declared = await self.names.declared(name) if defn is None else None
        max_recoveries = defn.max_recoveries if defn is not None else 8
        if declared is not None:
            queue_name = declared[0] if queue_name is None else queue_name
            max_recoveries = declared[1]
        now = self.clock.now()
        wake_at = start_times.start_at(now, delay, run_at)
        if queue_name is None and defn is not None:
            queue_name = defn.queue
        record = RunRecord(
            run_id=run_id or ids.new_run_id(),
            workflow=name,
            status=_PENDING,
            args=args_text,
            created_at=now,
            updated_at=now,
            max_recoveries=max_recoveries,
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
            record.status = _RUNNING
            record.owner = slot.owner
            record.attempt = 1
            record.started_at = now
            record.fence = 1  # the run's first claim
        try:
            stored, created = await self.store.write(run_ops.create_run(record))
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
        raise InvalidArguments(f"expected a @cairn.workflow or a workflow name, got {workflow!r}")

    async def get(self, run_id: str) -> RunHandle:
        """A handle on an existing run; RunNotFound if unknown."""
        await self.record(run_id)
        return RunHandle(self, run_id)

    # messages

    async def emit(
        self, event_type: str, payload: Any = None, *, key: str | None = None
    ) -> list[RunHandle]:
        """Start the workflows subscribed to `event_type` (see `runtime.triggers.emit`)."""
        return await triggers.emit(self, event_type, payload, key=key)

    async def resume_hook(self, token: str, payload: Any = None) -> str:
        """Call a hook once with its token and a payload.

        Returns the run id it resumed (see `runtime.hooks.resume`).
        """
        return await hooks.resume(self, token, payload)


def _start_names(
    run_id: Any, queue: Any, dedup_key: Any, partition: Any, priority: Any
) -> str | None:
    """The queue's name; InvalidName (or TypeError) for an option no store can take.

    Checked before anything reaches SQL: PostgreSQL refuses a NUL and compares no text
    with a number, and SQLite would store either.
    """
    # Three tests, not a loop over pairs: every start passes here, most with none of them.
    if run_id is not None:
        check_name(run_id, "run_id")
    if dedup_key is not None:
        check_name(dedup_key, "dedup_key")
    if partition is not None:
        check_name(partition, "partition")
    if type(priority) is not int or priority != 0:  # the default 0 needs no checks
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidArguments(f"priority must be an integer, got {priority!r}")
        if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            raise InvalidValue(
                f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {priority}"
            )
    if queue is None:
        return None
    queue_name = getattr(queue, "name", queue)
    return None if queue_name is None else check_queue_name(queue_name, "queue")


# A member's `.value` is a Python-level property: read once here for `start`.
_PENDING, _RUNNING = RunStatus.PENDING.value, RunStatus.RUNNING.value

# A run's priority is an INTEGER column on both stores (PostgreSQL's is 32 bits).
PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1

# The keyword options of `start` (run_id, queue, ...): not arguments of the workflow.
START_OPTIONS = frozenset(
    name
    for name, param in inspect.signature(RunControl.start).parameters.items()
    if param.kind is inspect.Parameter.KEYWORD_ONLY
)


def _same_start(stored: RunRecord, sent: RunRecord) -> bool:
    """True if `stored` is the run `sent` itself (not another start of the same id)."""
    return (stored.owner, stored.fence, stored.created_at, stored.args) == (
        sent.owner,
        sent.fence,
        sent.created_at,
        sent.args,
    )
