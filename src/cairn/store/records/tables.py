"""Records of the store's rows: runs, journal entries, attempts, workers, hooks, tasks."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RunRecord:
    """One row of `runs`. Serialized fields (`args`, `result`, ...) are JSON text."""

    run_id: str
    workflow: str
    status: str
    args: str
    created_at: float
    updated_at: float
    result: str | None = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    attempt: int = 0
    recoveries: int = 0
    max_recoveries: int = 8
    owner: str | None = None
    wake_at: float | None = None
    parent_id: str | None = None
    queue: str | None = None
    priority: int = 0
    dedup_key: str | None = None
    partition_key: str | None = None
    columns: str | None = None
    progress: str | None = None
    waiting_for: str | None = None
    scheduled_at: float | None = None
    continued_from: str | None = None
    continued_to: str | None = None
    control: str | None = None
    detached: int = 0
    version: str | None = None
    fence: int = 0  # bumped by every claim: see Lease
    # The W3C trace context (JSON of traceparent/tracestate) the run was started in.
    trace_context: str | None = None
    execution: int = 1  # a retry begins the next execution (see ExecutionRecord)
    restarted_from: str | None = None  # the run this one restarts (same input)
    forked_from: str | None = None  # the run this one forks ...
    forked_from_seq: int | None = None  # ... reusing its entries before this seq
    # What started it (models.ORIGINS); None for runs from before cairn recorded it.
    origin: str | None = None
    # A WAITING run's open waits: the JSON array of the channels they consume, set when it
    # parks. A message wakes the run only on one of them (NULL: on any, as before 14).
    waits_on: str | None = None
    # Times the run woke and parked again without progress in the minute before it last
    # parked, as its worker counted them (0 once it makes progress); see SPINNING_AFTER.
    futile_wakes: int = 0


RUN_FIELDS: tuple[str, ...] = tuple(RunRecord.__dataclass_fields__)


# Not frozen, like StepRecord: every step passes one. Treat as read-only.
@dataclass(slots=True)
class Lease:
    """The right of one attempt to write for a run: its worker and the run's fence then.

    Every claim (and a local start) bumps `runs.fence`; each write on behalf of an attempt
    checks owner and fence in the same statement, so an older attempt of the run (a
    worker that was paused past its lease and came back) can write nothing.
    """

    owner: str
    fence: int


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a run
# builds one of these per step (about a tenth of a step's CPU time). Treat as read-only.
@dataclass(slots=True)
class StepRecord:
    """One journal entry: the recorded outcome of a durable operation."""

    run_id: str
    seq: int
    key: str
    kind: str
    name: str
    status: str
    attempts: int
    started_at: float | None
    finished_at: float | None
    result: str | None = None
    error: str | None = None
    # A step's arguments (core/step_input.py), written with its outcome; None otherwise.
    input: str | None = None


STEP_FIELDS: tuple[str, ...] = tuple(StepRecord.__dataclass_fields__)
# What a replay reads of its journal: not the inputs, which only the history shows.
JOURNAL_FIELDS: tuple[str, ...] = tuple(name for name in STEP_FIELDS if name != "input")


# How an attempt that produced no outcome ended: it raised, or its worker died or lost
# the run while it ran (recorded by the worker that took the run over), or its code
# stopped for a cancel of the run (`cairn.check_cancelled()`, `cancel_stops`).
FAILED = "failed"
INTERRUPTED = "interrupted"
CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """A failed (interrupted, cancelled) attempt of a step, kept for history and retry accounting.

    Attempts are numbered within an execution of the run. An interrupted attempt's
    `failed_at` is when another worker took the run over, `worker` the one that ran it.
    """

    run_id: str
    key: str
    attempt: int
    error_type: str
    message: str
    traceback: str
    failed_at: float
    retry_at: float | None
    started_at: float | None = None  # None for attempts recorded before schema 13
    execution: int = 1
    outcome: str = FAILED
    worker: str | None = None


ATTEMPT_FIELDS: tuple[str, ...] = tuple(AttemptRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """Who began an execution of a run, when, why, and from which history entry on.

    `cause` is "retry" (execution 2 and later), or "restart" / "fork" for the first
    execution of a copied run. A run started the ordinary way has no record for its first.
    """

    run_id: str
    execution: int
    started_at: float
    cause: str
    started_by: str | None
    from_seq: int


EXECUTION_FIELDS: tuple[str, ...] = tuple(ExecutionRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class RetriedStep:
    """A journal entry a retry took out of the journal: the failure it ran again."""

    execution: int  # the execution that recorded it
    step: StepRecord


@dataclass(frozen=True, slots=True)
class Lineage:
    """What a run's audit trail adds to its journal: executions, retried entries, copies."""

    executions: list[ExecutionRecord]
    retried: list[RetriedStep]
    copies: list[RunRecord]  # runs restarted or forked from this one, oldest first


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A live (or recently live) worker process."""

    worker_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    concurrency: int = 0
    queues: str | None = None
    workflows: str | None = None  # JSON list of the workflows it claims; None: unknown
    lease: float = 10.0  # its own lease: its heartbeat is judged by it
    process: str | None = None  # "boot id/pid namespace/pid/start ticks" (leases.py)
    # The steps it had in flight at its last heartbeat (JSON, see store/in_flight.py).
    executing: str | None = None
    # The last heartbeat of a worker a neighbour declared dead (heartbeat_at is then 0).
    last_heartbeat_at: float | None = None
    # JSON object: the version of each workflow it executes that declares one; None: unknown.
    versions: str | None = None


WORKER_FIELDS: tuple[str, ...] = tuple(WorkerRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class HookRecord:
    """A hook: a single-use callback, found by its token's digest, and its payload's schema."""

    token: str
    run_id: str
    name: str
    created_at: float
    expires_at: float | None = None
    used_at: float | None = None
    payload_schema: str | None = None  # JSON Schema text; None: any payload
    payload_model: str | None = None  # `module:qualname` of a pydantic model

    def usable(self, now: float) -> bool:
        """Not used yet and not expired at `now` (its run may still have finished)."""
        return self.used_at is None and (self.expires_at is None or self.expires_at > now)


HOOK_FIELDS: tuple[str, ...] = tuple(HookRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A human task: a form a person fills in to let a waiting run go on."""

    task_id: str
    run_id: str
    name: str
    title: str
    data: str | None
    form: str | None
    form_model: str | None
    assignee: str | None
    status: str
    created_at: float
    due_at: float | None = None
    submitted_at: float | None = None
    submitted_by: str | None = None
    submitted_values: str | None = None


TASK_FIELDS: tuple[str, ...] = tuple(TaskRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A queue's limits as stored (None: no limit)."""

    name: str
    concurrency: int | None = None
    per_worker: int | None = None
    rate_count: int | None = None
    rate_period: float | None = None
    partition_concurrency: int | None = None


@dataclass(slots=True)
class ScheduleRecord:
    """One row of `schedules`: a definition plus the state of its next tick.

    `every`, `catchup` and the tick times are seconds (epoch seconds for times); `args`
    is the serialized `{"args": [...], "kwargs": {...}}` each run gets. `source` is
    "code" (declared with `cairn.schedule`) or "api" (created at run time).
    """

    schedule_id: str
    workflow: str
    cron: str | None
    every: float | None
    tz: str
    overlap: str
    catchup: float
    args: str
    queue: str | None = None
    max_recoveries: int = 8
    source: str = "api"
    paused: int = 0
    next_tick: float | None = None
    buffered_tick: float | None = None
    last_run_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


SCHEDULE_FIELDS: tuple[str, ...] = tuple(ScheduleRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Fired:
    """What firing schedule ticks did: runs started, runs cancelled (cancel_other), skips."""

    started: list[str]
    cancelled: list[str]
    skipped: int = 0
    buffered: bool = False


@dataclass(frozen=True, slots=True)
class Subscription:
    """A workflow started by every emit of `event_type` (its payload as the one argument)."""

    event_type: str
    workflow: str
    queue: str | None = None
    max_recoveries: int = 8


@dataclass(frozen=True, slots=True)
class StepTaskRecord:
    """One attempt of a step sent to a step queue (see core/remote_steps.py).

    `step` names the registered step; `target` is `module:qualname` of a `cairn.run_step`
    function instead. `claims` counts the workers that took it: only the latest may report.
    """

    task_id: str
    run_id: str
    key: str
    attempt: int
    step: str
    target: str | None
    queue: str
    input: str | None
    timeout: float | None
    # queued, running, done; or, closed without an outcome: dropped (its run ended
    # first), lost (its run ended after its worker let the claim's lease run out).
    status: str
    worker_id: str | None
    claims: int
    lease_until: float | None
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    # JSON list of the claims taken over after their worker let the lease run out:
    # {"worker", "started_at", "lease_until"} each (see programs/step_tasks.py).
    interrupted: str | None = None
    # The trace context of the run's attempt that sent it (observability/propagation.py),
    # or None: its span's parent on the worker that executes it.
    trace_context: str | None = None


STEP_TASK_FIELDS: tuple[str, ...] = tuple(StepTaskRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One item of a run's named stream: a chunk, its "close", or a "reset".

    A chunk's `value` is JSON text. A reset voids the chunks step `step_key`'s attempt
    `attempt` wrote (it failed, or its worker died); `step_key` is "~stream" for
    workflow code's writes, whose `attempt` counts them.
    """

    seq: int
    kind: str
    step_key: str
    attempt: int
    value: str | None
    created_at: float
