"""QueueControl: queue limits in the database, readable and changeable while workers run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.authoring.queues import check_limit, parse_rate
from cairn.authoring.registry import DeclaredQueue
from cairn.names import check_queue_name
from cairn.store.programs import queues as queue_ops
from cairn.store.records import QueueRecord

if TYPE_CHECKING:
    from cairn.runtime.control_view import ControlView

_KEEP: Any = object()


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue's limits as workers apply them now (None: no limit)."""

    name: str
    concurrency: int | None
    per_worker: int | None
    rate: str | None
    partition_concurrency: int | None


def _rate_text(record: QueueRecord) -> str | None:
    if record.rate_count is None or record.rate_period is None:
        return None
    return f"{record.rate_count}/{record.rate_period:g}s"


def record_of(queue: DeclaredQueue) -> QueueRecord:
    """The stored form of a code declaration."""
    count, period = queue.rate_limit if queue.rate_limit else (None, None)
    return QueueRecord(
        name=queue.name,
        concurrency=queue.concurrency,
        per_worker=queue.per_worker,
        rate_count=count,
        rate_period=period,
        partition_concurrency=queue.partition_concurrency,
    )


class QueueControl:
    """List and change queue limits (`engine.queues`, `cairn queues`)."""

    def __init__(self, control: ControlView) -> None:
        self._control = control

    async def declare(self, queues: list[DeclaredQueue]) -> None:
        """Store code declarations (a changed declaration replaces live limits)."""
        now = self._control.clock.now()
        for queue in queues:
            record = record_of(queue)
            declared = json.dumps(
                [
                    record.concurrency,
                    record.per_worker,
                    record.rate_count,
                    record.rate_period,
                    record.partition_concurrency,
                ]
            )
            await self._control.store.write(
                queue_ops.declare_queue(record, declared=declared, now=now)
            )

    async def list(self) -> list[QueueInfo]:
        """Every queue with stored limits."""
        return [
            QueueInfo(q.name, q.concurrency, q.per_worker, _rate_text(q), q.partition_concurrency)
            for q in await self._control.store.read(queue_ops.list_queues())
        ]

    async def get(self, name: str) -> QueueInfo | None:
        """One queue's limits, or None if it has none stored."""
        for queue in await self.list():
            if queue.name == name:
                return queue
        return None

    async def update(
        self,
        name: str,
        *,
        concurrency: int | None = _KEEP,
        per_worker: int | None = _KEEP,
        rate: str | None = _KEEP,
        partition_concurrency: int | None = _KEEP,
    ) -> QueueInfo:
        """Change limits live; omitted ones stay, None removes one.

        Workers apply the new limits at their next claim, without a restart.

        Raises:
            InvalidName: `name` breaks the name rule (see cairn.names).
            ValueError: a limit that is not a positive integer, or a bad rate.
        """
        check_queue_name(name, "queue name")
        current = await self.get(name)
        merged: dict[str, Any] = {
            "concurrency": concurrency,
            "per_worker": per_worker,
            "rate": rate,
            "partition_concurrency": partition_concurrency,
        }
        for key, value in merged.items():
            if value is _KEEP:
                merged[key] = getattr(current, key) if current is not None else None
        _validate(name, merged)
        count, period = (None, None)
        if merged["rate"] is not None:
            count, period = parse_rate(str(merged["rate"]), what=f"rate of queue {name!r}")
        record = QueueRecord(
            name=name,
            concurrency=merged["concurrency"],
            per_worker=merged["per_worker"],
            rate_count=count,
            rate_period=period,
            partition_concurrency=merged["partition_concurrency"],
        )
        await self._control.store.write(
            queue_ops.update_queue(record, now=self._control.clock.now())
        )
        self._control.wake_local()
        return QueueInfo(
            name,
            record.concurrency,
            record.per_worker,
            _rate_text(record),
            record.partition_concurrency,
        )


def _validate(name: str, values: dict[str, Any]) -> None:
    for key in ("concurrency", "per_worker", "partition_concurrency"):
        check_limit(values[key], f"{key} of queue {name!r}")
