"""The one storage interface every backend implements.

Writes that the engine acknowledges to a workflow (a step outcome, a finished run) are
committed before the call returns. Backends may share one commit among concurrent callers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from cairn.store.records import (
    AttemptRecord,
    Beat,
    Claimed,
    Counts,
    Delivery,
    Fired,
    HookRecord,
    Lease,
    Lineage,
    Pruned,
    PruneQuery,
    QueueRecord,
    RunQuery,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    StepTaskRecord,
    Subscription,
    TaskRecord,
    WorkerRecord,
)


class LeaseLost(Exception):
    """The run is no longer held by this lease (taken over or claimed again); nothing written."""


class Health(Protocol):
    """How recently a store could not reach its database (see `Store.health`)."""

    def trouble_at(self) -> float:
        """When (time.monotonic()) the store last met an outage or a long lock wait.

        0.0 if never. A worker judges other workers' heartbeats only after a whole lease
        without trouble: while the database was away, theirs could not be written either.
        """
        ...

    def trouble(self) -> None:
        """Note that the database is away or locked now (a heartbeat failed, say)."""
        ...

    def stalled_runs(self, seconds: float) -> dict[tuple[str, int], float]:
        """Runs (id, fence) with a wait for the database older than `seconds`; its age.

        Any thread. A store whose waits cannot stall for ever (SQLite) reports none.
        """
        ...

    def watch_loop(self, responsive_since: Callable[[], float] | None) -> None:
        """Age waits only while the event loop answers (a blocked loop is not a stall).

        `responsive_since` (any thread) gives when it last began answering again after a
        block, or now while it is blocked; None forgets it.
        """
        ...

    @property
    def unwritable(self) -> str | None:
        """Why this store can never write again (a read-only SQLite file), or None.

        Not a passing condition: a worker that sees it stops (see runtime/worker.py).
        """
        ...


class SideChannel(Protocol):
    """A connection of its own, for one thread: heartbeats that go on when the loop is busy.

    Every method blocks the calling thread (never an event loop) and may raise StoreError.
    """

    def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Heartbeat `worker` by the database's clock (see `Store.beat`)."""
        ...

    def close(self) -> None:
        """Disconnect."""
        ...


class StepTransaction(Protocol):
    """One open database transaction for one attempt of a `@cairn.transaction` step.

    The user's writes go through `connection`; `commit` adds the step's journal entry to
    the same transaction, fenced by the run's lease, and commits both or neither. Until
    `commit` or `rollback` returns, the store holds its write path for this transaction.
    """

    @property
    def connection(self) -> Any:
        """The driver's connection, inside the transaction (see docs/howto/transaction.md)."""
        ...

    def state(self) -> Literal["open", "aborted", "ended"]:
        """Its state: open, aborted (a statement failed) or ended (by the user's code)."""
        ...

    async def commit(
        self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord] = ()
    ) -> None:
        """Write `marks` (upserted) and `step` fenced by `lease`, then COMMIT.

        Raises LeaseLost (rolled back) if the run is not held; StoreError if the database
        failed it (rolled back), or StoreUnavailable with `.unknown` if the reply to COMMIT
        was lost. Always ends the transaction and frees the write path.
        """
        ...

    async def rollback(self) -> None:
        """Undo everything the transaction wrote and free the write path (idempotent)."""
        ...


class Store(Protocol):
    """Persistence for runs, their journals, and the workers that execute them."""

    dialect: str
    # True when `wait_for_work` itself wakes for every known timer (wake times come with
    # this store's commits and other processes' notifications), so a worker need not
    # read `next_wake` before each wait.
    wakes_for_timers: bool

    @property
    def health(self) -> Health:
        """When the store last met trouble (an outage, a long wait for a lock)."""
        ...

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises SchemaTooNew for a newer schema."""
        ...

    async def close(self) -> None:
        """Flush pending writes and disconnect."""
        ...

    async def schema_version(self) -> int:
        """The newest migration applied to the database (a read: proves it answers)."""
        ...

    # runs

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert `run` unless its run_id exists; returns the stored run and whether it is new."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None when no run has that id."""
        ...

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching `query`, newest first, at most `query.limit` of them."""
        ...

    async def count_runs(self, query: RunQuery, limit: int | None = None) -> dict[str, int]:
        """How many runs match `query`'s filters, by status, in one read.

        `query.status`, `cursor` and `limit` are ignored; statuses without runs are absent.
        With `limit` and no filter, each status is counted up to `limit` (a count equal
        to `limit` is then a lower bound, the others are exact): a read bounded by `limit`
        whatever the size of the table. With `limit` and filters, counting stops after
        that many matching runs in all (in no particular order): counts that add up to
        `limit` are then lower bounds.
        """
        ...

    async def finish_run(
        self,
        run_id: str,
        lease: Lease,
        status: str,
        *,
        result: str | None,
        error: str | None,
        now: float,
        alone: bool = False,
    ) -> None:
        """End a run held by `lease` and release it. Raises LeaseLost if not held.

        In the same transaction: a parent run gets a message on channel `child:RUN_ID`
        (and is woken), the run's unfinished attached children are asked to cancel, and
        its open human tasks become "cancelled".
        """
        ...

    async def continue_run(self, run_id: str, lease: Lease, new_run: RunRecord, now: float) -> None:
        """End a run as CONTINUED and create its successor, in one transaction.

        `continued_to` of the old run names `new_run`, and the events queued for the old
        run that none of its waits took are queued for `new_run` instead. Raises
        LeaseLost if not held.
        """
        ...

    async def control_run(self, run_id: str, action: str, *, now: float) -> str | None:
        """Apply "cancel", "pause" or "resume" in one transaction; returns the status after.

        A never-started run is cancelled at once; a parked run is paused at once, or made
        due so it replays into the cancellation; an executing run gets `control` set for
        its worker to act on. None if no run has that id; a finished run is unchanged.
        """
        ...

    async def controlled_runs(self, owner: str) -> list[tuple[str, str]]:
        """(run_id, control) of the runs `owner` (a worker id) holds with a pending request."""
        ...

    async def retry_run(self, run_id: str, *, now: float, by: str | None = None) -> bool:
        """Requeue a FAILED run as PENDING, as its next execution, from the failed step.

        In one transaction: `runs.execution` grows by one and an ExecutionRecord (cause
        "retry", `by`, `now`) says so; a failed last journal entry moves to the retried
        entries (see `load_lineage`), so that its step runs again. Attempts are kept: each
        carries its execution. False (nothing written) if the run is not FAILED.
        """
        ...

    async def copy_run(
        self,
        new_run: RunRecord,
        source_id: str,
        *,
        before_seq: int | None,
        by: str | None = None,
        now: float,
    ) -> None:
        """Create `new_run`, a restart (`before_seq` None) or fork of run `source_id`.

        A fork copies the source's journal entries with seq < `before_seq` that are not
        "waiting". `new_run` carries its `restarted_from` / `forked_from`; an
        ExecutionRecord for its first execution (cause "restart" or "fork", `by`, `now`)
        is written in the same transaction.
        """
        ...

    async def load_lineage(self, run_id: str) -> Lineage:
        """What a run's audit trail adds to its journal.

        Its ExecutionRecords (by number), the entries retries took out of its journal (by
        execution, then seq), and the runs restarted or forked from it (oldest first).
        """
        ...

    async def park_run(
        self,
        run_id: str,
        lease: Lease,
        status: str,
        *,
        wake_at: float | None,
        waiting_for: str | None,
        now: float,
        waits_on: Sequence[str] | None = None,
        futile_wakes: int = 0,
    ) -> None:
        """Park a run held by `lease` as SLEEPING or WAITING and release it.

        It becomes claimable again at `wake_at`. A WAITING run's `waits_on` are the
        channels its open waits consume: a message on one of them makes it claimable at
        once (one already queued too), a message on any other channel does not. None:
        any message does (what runs parked before waits_on existed get). `futile_wakes`
        is stored for people to see (see RunRecord). Raises LeaseLost if not held.
        """
        ...

    async def update_run_meta(
        self,
        run_id: str,
        *,
        columns: dict[str, str] | None,
        progress: str | None,
        now: float,
    ) -> None:
        """Merge indexed columns (name -> JSON text) and set progress (JSON text).

        None leaves a field unchanged; an unknown run is left alone (nothing is written).
        """
        ...

    async def prune_runs(
        self,
        query: PruneQuery,
        *,
        after: tuple[float, str] | None = None,
        limit: int = 500,
        dry_run: bool = False,
    ) -> Pruned:
        """Delete one batch of finished runs past retention, in one short transaction.

        Looks at the next `limit` runs with a status in `query.statuses` (default: every
        finished one) that finished before `query.finished_before`, oldest finished
        first, after `after` (`Pruned.after` of the previous batch). Each is deleted with
        every row it owns (history, attempts, messages, hooks, tasks, columns,
        executions), unless an unfinished run depends on it: an unfinished parent, an
        unfinished child, or an unfinished later run of its continue_as_new chain.
        `dry_run` deletes nothing and counts what it would delete (a read).
        """
        ...

    # journal

    async def load_journal(
        self, run_id: str, *, inputs: bool = False, after_seq: int = 0, limit: int | None = None
    ) -> list[StepRecord]:
        """Every recorded outcome of the run, in seq order.

        Each step's `input` is read only with `inputs` (for its history): a replay needs
        none, and they can be large. Without it, `input` is None. A page of a long
        history: only entries with seq > `after_seq`, at most `limit` of them.
        """
        ...

    async def journal_extent(self, run_id: str) -> tuple[int, int]:
        """How many entries the run's journal holds, and its highest seq ((0, 0) if none).

        One read that counts without loading them (the dashboard's run page and stream).
        """
        ...

    async def record_step(self, lease: Lease, step: StepRecord) -> None:
        """Commit a step outcome for a run held by `lease`. Raises LeaseLost if not held.

        On PostgreSQL a write whose reply was lost is sent again; if that second try fails
        the outcome of the first is unknown: StoreUnavailable with `.unknown` set.
        """
        ...

    async def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Commit a failed attempt of a step. Raises LeaseLost if not held."""
        ...

    async def load_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every failed or interrupted attempt of the run, by execution, key, attempt."""
        ...

    async def upsert_step(self, lease: Lease, step: StepRecord) -> None:
        """Like record_step, but replaces an entry with the same key (a "waiting" one)."""
        ...

    async def begin_step_transaction(self, *, sync: bool) -> StepTransaction:
        """Open a transaction whose connection a `@cairn.transaction` step writes through.

        `sync`: the step's function is a plain one, run in a thread (PostgreSQL then hands
        out a blocking psycopg connection). Raises StoreUnavailable while the database is
        away or the write lock is held elsewhere for long.
        """
        ...

    # messages, hooks and tasks

    async def send_message(
        self, run_id: str, channel: str, payload: str, *, idempotency_key: str | None, now: float
    ) -> Delivery | None:
        """Queue `payload` on the run's `channel`; wake the run if one of its waits takes it.

        A WAITING run whose waits take the channel (see park_run's `waits_on`) is made due
        now. Returns the run's status, whether it was woken and what its waits consume; None
        when no run has that id. A finished run gets no message (its status is returned).
        A repeated (run, channel, idempotency_key) is stored once.
        """
        ...

    async def consume_message(self, lease: Lease, channel: str, step: StepRecord) -> str | None:
        """Atomically take the oldest unconsumed message on `channel` of `step.run_id`.

        `step` is upserted with the payload as its result. Returns None (nothing written)
        if none is queued; raises LeaseLost if not held.
        """
        ...

    async def consume_messages(
        self,
        lease: Lease,
        channel: str,
        step: StepRecord,
        *,
        limit: int,
        combine: Callable[[list[str]], str],
    ) -> str | None:
        """Atomically take the `limit` oldest unconsumed messages on `channel` of the run.

        `step` is upserted with `combine(payloads)` (oldest first) as its result, and that
        text is returned. Returns None (nothing written) if none is queued; raises
        LeaseLost if not held.
        """
        ...

    async def create_hook(self, lease: Lease, step: StepRecord, hook: HookRecord) -> None:
        """Upsert the hook's journal entry and insert its row, in one transaction.

        A row with the same token already there is kept as it is (a replayed creation).
        Raises LeaseLost if not held.
        """
        ...

    async def get_hook(self, token: str) -> HookRecord | None:
        """The hook stored under `token` (as stored: the digest), used or not; None if none."""
        ...

    async def resume_hook(self, token: str, payload: str, *, now: float) -> str | None:
        """Mark the hook used and queue `payload` on channel `hook:TOKEN` of its run.

        Returns the run id; None (nothing written) if the token is unknown, used or expired,
        or its run has finished.
        """
        ...

    async def list_hooks(
        self, *, now: float, run_id: str | None = None, limit: int = 100
    ) -> list[HookRecord]:
        """Hooks that can still be called at `now`, oldest first, at most `limit`.

        That is: unused, not expired, and their run not finished; only `run_id`'s if
        given. Their `token` is the stored digest, which resumes nothing.
        """
        ...

    async def create_task(self, lease: Lease, step: StepRecord, task: TaskRecord) -> None:
        """Upsert the task's journal entry and insert its row, in one transaction."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        ...

    async def list_tasks(
        self, *, status: str | None, assignee: str | None, run_id: str | None = None
    ) -> list[TaskRecord]:
        """Tasks matching every given filter, oldest first."""
        ...

    async def submit_task(
        self, task_id: str, values: str, *, by: str | None, now: float
    ) -> TaskRecord | None:
        """Mark an open task submitted (by, when, values) and queue the values for its run.

        The values go on channel `task:ID`. Returns None (nothing written) if not open.
        """
        ...

    async def close_tasks(self, run_id: str, status: str, task_id: str | None = None) -> None:
        """Give the run's open tasks (or only `task_id`) a final `status`."""
        ...

    # step queues

    async def enqueue_step_task(self, lease: Lease, task: StepTaskRecord) -> None:
        """Insert an attempt for its step queue's workers (once: again, nothing).

        Raises LeaseLost if the run is not held by `lease`.
        """
        ...

    async def claim_step_tasks(
        self,
        queues: Sequence[str],
        worker_id: str,
        *,
        lease: float,
        limit: int,
        only: str | None = None,
    ) -> list[StepTaskRecord]:
        """Take up to `limit` attempts on `queues` (only task `only`, if given).

        Queued ones, and those whose worker let its lease (seconds, on the database's
        clock) run out; never those of a finished run.
        """
        ...

    async def claimable_step_tasks(self, *, limit: int) -> list[tuple[str, str, int]]:
        """(task id, queue, claims) of up to `limit` attempts claimable now (read only)."""
        ...

    async def renew_step_task(self, task: StepTaskRecord, *, lease: float) -> bool:
        """Extend this claim's lease; False if another claim took it or its run is over."""
        ...

    async def report_step_task(
        self, task: StepTaskRecord, channel: str, payload: str, *, now: float
    ) -> bool:
        """Close the attempt and queue `payload` on the run's `channel` in one transaction.

        False (nothing written) if this claim is no longer the latest.
        """
        ...

    async def drop_step_task(self, task: StepTaskRecord, *, now: float) -> None:
        """Close an attempt held by this claim without an outcome (its run is over)."""
        ...

    async def release_step_task(self, task: StepTaskRecord) -> None:
        """Hand an attempt held by this claim back to its queue (its worker stops)."""
        ...

    async def list_step_tasks(self, run_id: str) -> list[StepTaskRecord]:
        """The run's attempts sent to step queues, oldest first."""
        ...

    # workers and claims

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row; its times are the database's clock."""
        ...

    async def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Mark `worker` alive now, by the database's clock; what it holds, every worker.

        The same write stores `worker.executing` (the steps it has in flight). A worker
        whose row is gone registers again. The runs in `let_go` (id, fence) that it still
        holds under that fence are queued again (PENDING, no owner) in the same
        transaction, and named in `Beat.released`: their work stopped making progress.
        `side_channel()` does the same from a thread of its own (and wakes other workers
        for the runs it releases).
        """
        ...

    def side_channel(self) -> SideChannel | None:
        """A connection of its own for a heartbeat thread; None if the store has none.

        (SQLite `:memory:` has none: no other process can share it, so nobody else can
        judge its heartbeats.)
        """
        ...

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        ...

    async def get_worker(self, worker_id: str) -> WorkerRecord | None:
        """The worker row, or None (a worker that stopped cleanly has none)."""
        ...

    async def known_workflows(self, within: float) -> set[str] | None:
        """The workflows that workers seen in the last `within` seconds said they execute.

        Seen by the database's clock: a worker's heartbeat, or when a worker now gone
        registered, stopped or was last heard of before it was found dead. None when a
        worker seen in that time does not say (it may execute any workflow).
        """
        ...

    async def counts(self) -> Counts:
        """Unfinished runs by (queue, status), and workers whose heartbeat is within their lease.

        A read of the unfinished runs and the workers table (for metrics at scrape time).
        Queues or statuses without runs are absent from `runs`. `spinning` counts the
        unfinished runs with more than SPINNING_AFTER futile wakes.
        """
        ...

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now, so their runs can be recovered without waiting for the lease."""
        ...

    async def release_run(
        self, run_id: str, lease: Lease, *, interrupted: Sequence[AttemptRecord] = ()
    ) -> bool:
        """Queue again a run `lease` holds but whose attempt ended early; True if it did.

        The run becomes PENDING with no owner (claimed again without counting a
        recovery), and the `interrupted` attempts (step attempts the ending cut short)
        are recorded in the same transaction, each unless its step's outcome is in the
        journal. A no-op (False) if `lease` no longer holds it.
        """
        ...

    async def remove_worker(self, worker_id: str) -> None:
        """Delete a worker row and release the runs it still owns back to PENDING."""
        ...

    async def claim_runs(
        self,
        worker_id: str,
        limit: int,
        *,
        now: float,
        stale: bool,
        queues: list[str] | None = None,
        workflows: list[str] | None = None,
        versions: dict[str, str] | None = None,
        orphans_first: bool = False,
        only: list[str] | None = None,
    ) -> Claimed:
        """Atomically take up to `limit` runs to execute (only of the run ids `only`, if given).

        Only runs of `workflows` are taken when it is given (a worker takes only what its
        code can execute). A queued run without a version gets `versions[workflow]` (the
        version of the code that first executes it).

        Candidates are parked runs now due, PENDING runs that are due (only of `queues`
        when given) and whose queue's limits allow another start, and RUNNING runs whose
        owner is dead (recoveries): it has no worker row or was expired, or (only with
        `stale`) its heartbeat is older than its own lease by the database's clock.
        Orphans come after pending runs, unless `orphans_first` (a worker asks that now
        and then, so that a backlog of new runs never keeps a dead worker's runs waiting).
        Claimed runs become RUNNING, owned by `worker_id`, with their fence bumped;
        `attempt` grows for a start or recovery, not for a wake-up.
        A recovered run past its max_recoveries is ended FAILED instead and reported in
        `poisoned` (run id -> workflow). Either way, each step the dead owner's last
        heartbeat listed in flight for the run (under its fence) is recorded as an
        attempt with outcome "interrupted", unless its outcome or that attempt's failure
        is already recorded. A PENDING run held back by a limit gets
        `waiting_for` naming it. A run is never handed to two workers.
        """
        ...

    async def claimable_runs(
        self, *, now: float, limit: int, stale: bool, workflows: list[str]
    ) -> list[tuple[str, str, str | None, float]]:
        """Up to `limit` runs of each kind `claim_runs` could take now.

        Each as (run id, status, queue, mark): the mark changes when the run comes back
        in another state (a wake time, an orphan's fence). Read only: a transport
        publishes these ids for its consumers to claim (the claim decides, with the queue
        limits). Orphans count as `claim_runs` judges them with `stale`.
        """
        ...

    async def next_wake(self) -> float | None:
        """The earliest `wake_at` of a SLEEPING, WAITING or delayed PENDING run, or None."""
        ...

    async def wait_for_work(self, timeout: float) -> None:
        """Return when runs may have become claimable, or after `timeout` seconds.

        A hint, not a promise: it may return with nothing to claim, and it cannot see
        everything (a dead worker's lease running out tells nobody), so callers still claim
        at least every `timeout` seconds: polling is the fallback. PostgreSQL listens for
        NOTIFY; SQLite sees this process's writes at once and other processes' commits
        within about 50 ms (PRAGMA data_version).
        """
        ...

    # queues

    async def declare_queue(self, queue: QueueRecord, *, declared: str, now: float) -> None:
        """Store a code declaration's limits, unless the same declaration is stored.

        An operator's live change therefore stays until the code's declaration changes.
        """
        ...

    async def update_queue(self, queue: QueueRecord, *, now: float) -> None:
        """Set a queue's limits (creating the queue row if needed)."""
        ...

    async def list_queues(self) -> list[QueueRecord]:
        """Every queue with stored limits, by name."""
        ...

    # schedules

    async def create_schedule(self, schedule: ScheduleRecord) -> bool:
        """Insert a new schedule; False (nothing written) if a schedule has its id."""
        ...

    async def sync_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Insert a schedule declared in code, or update the stored one to match it.

        An update keeps the operator's state (paused, last run, buffered tick) and the
        stored next tick, unless cron, every or tz changed (then `schedule.next_tick`
        applies). Returns the stored schedule.
        """
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or None when no schedule has that id."""
        ...

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""
        ...

    async def set_schedule_paused(
        self, schedule_id: str, *, paused: bool, next_tick: float | None, now: float
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule; a buffered tick is dropped.

        A non-None `next_tick` replaces the stored one. Returns the schedule after, or
        None (nothing written) if unknown.
        """
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule (its runs are left alone); False if unknown."""
        ...

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        """Up to `limit` unpaused schedules with a tick due by `now` or a buffered tick.

        Earliest next tick first.
        """
        ...

    async def next_schedule_tick(self) -> float | None:
        """The earliest next tick of an unpaused schedule, or None."""
        ...

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: float,
        new_next: float,
        ticks: Sequence[tuple[float, str]],
        now: float,
    ) -> Fired | None:
        """Fire ticks of a schedule, once across every engine, in one transaction.

        Moves `next_tick` from `expected_next` to `new_next` (a compare-and-set: None and
        nothing written if the stored next tick differs or the schedule is paused), then
        applies the overlap policy to each (tick, run_id) in order against the schedule's
        latest run (following continue_as_new): `allow` starts a run, `skip` skips while
        that run is active, `buffer_one` keeps the first such tick as `buffered_tick`,
        `cancel_other` cancels that run (as `control_run`) and starts. A started run is
        PENDING with `scheduled_at` = its tick, and becomes the latest run.
        """
        ...

    async def release_buffered(
        self, schedule_id: str, *, tick: float, run_id: str, now: float
    ) -> Fired | None:
        """Start the buffered `tick` as run `run_id` if the latest run has ended.

        None (nothing written) while it is active, or if `tick` is no longer buffered.
        """
        ...

    async def trigger_schedule(
        self, schedule_id: str, *, run_id: str, now: float
    ) -> RunRecord | None:
        """Start one run of the schedule now (no overlap check); it becomes the latest run.

        None (nothing written) if unknown.
        """
        ...

    # event triggers

    async def sync_subscriptions(
        self, workflows: Sequence[tuple[str, str | None, str | None, int]], *, now: float
    ) -> None:
        """Store what each `(workflow, event_type, queue, max_recoveries)` subscribes to.

        A workflow listed with event_type None loses its subscriptions; workflows not
        listed are left alone (other deployments may define them).
        """
        ...

    async def list_subscriptions(self) -> list[Subscription]:
        """Every stored subscription, by event type then workflow."""
        ...

    async def emit_event(
        self,
        event_type: str,
        args: str,
        *,
        key: str | None,
        now: float,
        local: Sequence[Subscription] = (),
        lease: Lease | None = None,
        step: StepRecord | None = None,
        trace_context: str | None = None,
    ) -> list[str]:
        """Start one PENDING run (with `args`) per subscriber of `event_type`; their ids.

        Subscribers are the stored subscriptions plus `local` ones (which win for the same
        workflow). With a `key`, a (event_type, key) already emitted returns the ids
        stored then and starts nothing; a new one stores its ids when it started any run
        (run ids `emit_run_id(...)`). With `step`, the emit is part of the run held by
        `lease`: LeaseLost (nothing written) if not held, else `step` is journaled with
        the ids as its result, in the same transaction. The runs keep `trace_context`
        (the emitter's trace, see observability/propagation.py).
        """
        ...
