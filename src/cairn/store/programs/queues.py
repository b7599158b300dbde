"""Programs of queue limits: declared, updated, listed, and checked while claiming."""

from __future__ import annotations

from typing import Any, Literal

from cairn.store import _sql
from cairn.store.programs.base import Program, Sql, all_rows, one_row, operation, wakes
from cairn.store.records import QueueRecord

# How a run comes to be claimed. "start": a PENDING run (new, retried, handed back, or
# resumed before it ever ran); "wake": a parked run now due (its timer, an event, a
# child's end, a resume after a pause); "recover": a RUNNING run taken from a dead owner.
Entry = Literal["start", "wake", "recover"]

# The limits each entry must pass: the one place that says which limit holds which run.
# Only RUNNING runs hold a place in a queue. A run that starts or wakes takes a place
# (concurrency, per worker, partition); only a start counts toward the rate (a run is
# started once: waking it again is not a new start, see COUNT_STARTS). A recovered run
# was RUNNING all along and keeps its place in the queue and its partition while its
# owner is dead: it only moves to the claimer, so only the claimer's own limit applies.
# A parked run holds nothing, so a run waiting for another run of its queue (its child,
# say) never keeps that run from a place.
LIMITS: dict[Entry, tuple[str, ...]] = {
    "start": ("concurrency", "per_worker", "partition", "rate"),
    "wake": ("concurrency", "per_worker", "partition"),
    "recover": ("per_worker",),
}


class QueueGate:
    """Counts of one claim transaction, per queue, checked against the queue's limits.

    One gate serves every candidate of a claim, whatever its entry, so runs taken earlier
    in the claim count against those after them.
    """

    def __init__(self, worker_id: str, now: float) -> None:
        self.worker_id = worker_id
        self.now = now
        self.limits: dict[str, QueueRecord | None] = {}
        self.counts: dict[tuple[str, str], int] = {}
        # Per queue, the queue-wide limits (not a partition's) found reached.
        self.reached: dict[str, set[str]] = {}

    def _count(self, key: tuple[str, str], text: str, params: tuple[Any, ...]) -> Program[int]:
        if key not in self.counts:
            row = yield one_row(text, params)
            self.counts[key] = int(row[0])
        return self.counts[key]

    def held(self, queue: str, partition: str | None, entry: Entry) -> Program[str | None]:
        """Why a run of `queue` coming in by `entry` cannot be claimed now, or None."""
        if queue not in self.limits:
            row = yield Sql(_sql.SELECT_QUEUE, (queue,), "one", "update")
            self.limits[queue] = None if row is None else QueueRecord(*row)
        limits = self.limits[queue]
        if limits is None:
            return None
        applies = LIMITS[entry]
        name = f"queue {queue!r}"
        if limits.concurrency is not None and "concurrency" in applies:
            n = yield from self._count((queue, "all"), _sql.COUNT_EXECUTING, (queue,))
            if n >= limits.concurrency:
                self.reached.setdefault(queue, set()).add("concurrency")
                return f"{name}: concurrency limit {limits.concurrency} reached"
        if limits.per_worker is not None and "per_worker" in applies:
            key = (queue, "mine")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_MINE, (queue, self.worker_id))
            if n >= limits.per_worker:
                self.reached.setdefault(queue, set()).add("per_worker")
                return f"{name}: per-worker limit {limits.per_worker} reached"
        if (
            limits.partition_concurrency is not None
            and partition is not None
            and "partition" in applies
        ):
            key = (queue, f"p:{partition}")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_PARTITION, (queue, partition))
            if n >= limits.partition_concurrency:
                return (
                    f"{name}: partition {partition!r} limit {limits.partition_concurrency} reached"
                )
        if limits.rate_count is not None and limits.rate_period is not None and "rate" in applies:
            since = self.now - limits.rate_period
            n = yield from self._count((queue, "rate"), _sql.COUNT_STARTS, (queue, since))
            if n >= limits.rate_count:
                self.reached.setdefault(queue, set()).add("rate")
                return f"{name}: rate limit {limits.rate_count}/{limits.rate_period:g}s reached"
        return None

    def took(self, queue: str, partition: str | None, entry: Entry) -> None:
        """Count a run of `queue` just claimed by `entry` (where it takes a place)."""
        keys = {
            "concurrency": "all",
            "per_worker": "mine",
            "partition": f"p:{partition}",
            "rate": "rate",
        }
        for limit in LIMITS[entry]:
            key = (queue, keys[limit])
            if key in self.counts:
                self.counts[key] += 1

    def full(self, entry: Entry) -> set[str]:
        """The queues no further run coming in by `entry` can enter in this claim."""
        applies = set(LIMITS[entry])
        return {queue for queue, limits in self.reached.items() if limits & applies}


@operation
@wakes
def declare_queue(queue: QueueRecord, *, declared: str, now: float) -> Program[None]:
    """Store a code declaration's limits if the declaration changed since last stored."""
    yield Sql(
        _sql.DECLARE_QUEUE,
        (
            queue.name,
            queue.concurrency,
            queue.per_worker,
            queue.rate_count,
            queue.rate_period,
            queue.partition_concurrency,
            declared,
            now,
        ),
    )


@operation
@wakes
def update_queue(queue: QueueRecord, *, now: float) -> Program[None]:
    """Set a queue's limits (an operator's change, live)."""
    yield Sql(
        _sql.UPSERT_QUEUE_LIMITS,
        (
            queue.name,
            queue.concurrency,
            queue.per_worker,
            queue.rate_count,
            queue.rate_period,
            queue.partition_concurrency,
            now,
        ),
    )


@operation
def list_queues() -> Program[list[QueueRecord]]:
    """Read: every queue with stored limits, by name."""
    rows = yield all_rows(_sql.SELECT_QUEUES)
    return [QueueRecord(*row) for row in rows]
