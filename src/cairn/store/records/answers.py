"""What store calls take and answer besides rows: queries, claims, beats, deliveries, counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from cairn.store.records.tables import RunRecord, WorkerRecord


@dataclass(frozen=True, slots=True)
class Beat:
    """What one heartbeat saw: the runs its worker owns, and every worker row.

    `owned` maps the id of each RUNNING run owned by the worker to its fence; `workers`
    lets the worker look for dead neighbours without another query; `released` names the
    runs the beat let go of (see `workers.beat`).
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
    until: float | None = None  # created before this time
    origin: str | None = None  # what started them; models.UNKNOWN_ORIGIN: not recorded
    run_id_prefix: str | None = None
    tree: str | None = None  # this run and its descendants (see _sql.run_tree)


@dataclass(frozen=True, slots=True)
class PruneQuery:
    """Which finished runs retention deletes: finished before a time, of given statuses.

    `statuses` None: every finished status. `workflow` None: every workflow.
    """

    finished_before: float
    statuses: tuple[str, ...] | None = None
    workflow: str | None = None


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one batch of retention did: runs deleted (or deletable, for a dry run).

    `after` is `(finished_at, run_id)` of the last finished run the batch looked at, for
    the next batch to go on from; None when the batch reached the end.
    """

    count: int
    after: tuple[float, str] | None


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a claim handed to a worker: runs to execute, and runs it gave up as poisoned."""

    runs: list[RunRecord]
    poisoned: dict[str, str]  # run id -> its workflow
    # When each claimed run became due (run id -> time), for runs that were PENDING or
    # parked; a recovered run has none, nor has a PENDING one claimed before (handed
    # back, retried). The claim lag metric reads it.
    due: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What queueing a message for a run found (see waits.send_message).

    `status` is the run's status. `woken` says a wait of the run takes the message now:
    the run was WAITING on its channel and is due. `waits_on` are the channels a WAITING
    run's open waits consume (None for a run that is not waiting, or that parked before
    cairn kept them). `repeated` says the run already had a message of this idempotency
    key (a sender's retry, not a new message), whether it has finished since or not.
    `sealed` is the head of the run's encrypted arguments when a sender that cannot
    encrypt was refused (nothing was written).
    """

    status: str
    woken: bool = False
    waits_on: tuple[str, ...] | None = None
    repeated: bool = False
    sealed: str | None = None


@dataclass(frozen=True, slots=True)
class Counts:
    """How many runs are unfinished, by (queue, status), and how many workers are live.

    `spinning` counts the unfinished runs flagged as waking without progress.
    """

    runs: dict[tuple[str | None, str], int]
    live_workers: int
    spinning: int = 0
