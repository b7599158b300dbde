"""Programs of queue limits: declared, updated, listed, and checked while claiming."""

from __future__ import annotations

from typing import Any

from cairn.store import _sql
from cairn.store.programs.base import Program, Sql, all_rows, one_row, wakes
from cairn.store.records import QueueRecord


class QueueGate:
    """Counts of one claim transaction, per queue, checked against the queue's limits."""

    def __init__(self, worker_id: str, now: float) -> None:
        self.worker_id = worker_id
        self.now = now
        self.limits: dict[str, QueueRecord | None] = {}
        self.counts: dict[tuple[str, str], int] = {}

    def _count(self, key: tuple[str, str], text: str, params: tuple[Any, ...]) -> Program[int]:
        if key not in self.counts:
            row = yield one_row(text, params)
            self.counts[key] = int(row[0])
        return self.counts[key]

    def held(self, queue: str, partition: str | None) -> Program[str | None]:
        """Why a run of `queue` cannot start now, or None if it can."""
        if queue not in self.limits:
            row = yield Sql(_sql.SELECT_QUEUE, (queue,), "one", "update")
            self.limits[queue] = None if row is None else QueueRecord(*row)
        limits = self.limits[queue]
        if limits is None:
            return None
        name = f"queue {queue!r}"
        if limits.concurrency is not None:
            n = yield from self._count((queue, "all"), _sql.COUNT_EXECUTING, (queue,))
            if n >= limits.concurrency:
                return f"{name}: concurrency limit {limits.concurrency} reached"
        if limits.per_worker is not None:
            key = (queue, "mine")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_MINE, (queue, self.worker_id))
            if n >= limits.per_worker:
                return f"{name}: per-worker limit {limits.per_worker} reached"
        if limits.partition_concurrency is not None and partition is not None:
            key = (queue, f"p:{partition}")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_PARTITION, (queue, partition))
            if n >= limits.partition_concurrency:
                return (
                    f"{name}: partition {partition!r} limit {limits.partition_concurrency} reached"
                )
        if limits.rate_count is not None and limits.rate_period is not None:
            since = self.now - limits.rate_period
            n = yield from self._count((queue, "rate"), _sql.COUNT_STARTS, (queue, since))
            if n >= limits.rate_count:
                return f"{name}: rate limit {limits.rate_count}/{limits.rate_period:g}s reached"
        return None

    def took(self, queue: str, partition: str | None) -> None:
        """Count a run of `queue` just claimed."""
        for kind in ("all", "mine", "rate", f"p:{partition}"):
            key = (queue, kind)
            if key in self.counts:
                self.counts[key] += 1


@wakes
def declare_queue(queue: QueueRecord, declared: str, now: float) -> Program[None]:
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


@wakes
def update_queue(queue: QueueRecord, now: float) -> Program[None]:
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


def list_queues() -> Program[list[QueueRecord]]:
    """Every queue with stored limits."""
    rows = yield all_rows(_sql.SELECT_QUEUES)
    return [QueueRecord(*row) for row in rows]
