"""Plain records that cross the storage boundary; no driver types leak out."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """A failed attempt of a step, kept for history and for retry accounting."""

    run_id: str
    key: str
    attempt: int
    error_type: str
    message: str
    traceback: str
    failed_at: float
    retry_at: float | None
    started_at: float | None = None  # None for attempts recorded before schema 13


ATTEMPT_FIELDS: tuple[str, ...] = tuple(AttemptRecord.__dataclass_fields__)


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


WORKER_FIELDS: tuple[str, ...] = tuple(WorkerRecord.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Beat:
    """What one heartbeat saw: the runs its worker owns, and every worker row.

    `owned` maps the id of each RUNNING run owned by the worker to its fence; `workers`
    lets the worker look for dead neighbours without another query; `released` names the
    runs the beat let go of (see `Store.beat`).
    """

    owned: dict[str, int]
    workers: list[WorkerRecord]
    released: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Filters for listing runs; `cursor` is `(created_at, run_id)` of the last row seen."""

    status: str | None = None
    workflow: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    since: float | None = None
    parent_id: str | None = None
    version: str | None = None
    limit: int = 100
    cursor: tuple[float, str] | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a claim handed to a worker: runs to execute, and runs it gave up as poisoned."""

    runs: list[RunRecord]
    poisoned: dict[str, str]  # run id -> its workflow
    # When each claimed run became due (run id -> time), for runs that were PENDING or
    # parked; a recovered run has none. The claim lag metric reads it.
    due: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Counts:
    """How many runs are unfinished, by (queue, status), and how many workers are live."""

    runs: dict[tuple[str | None, str], int]
    live_workers: int


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
