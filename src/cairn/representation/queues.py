"""The JSON form of a queue and the limits a queue can have.

`cairn queues list|set --json` print these; the HTTP API (`/api/v1/queues`) answers them.
"""

from __future__ import annotations

from typing import Any

from cairn.runtime.queues import QueueInfo

# `queues set` flag -> QueueControl.update keyword; an omitted flag leaves its limit as is.
LIMITS = {
    "concurrency": "runs of the queue executing at once across all workers",
    "per_worker": "runs of the queue executing at once on one worker",
    "rate": "at most COUNT starts in any DUR, e.g. 100/1m",
    "partition_concurrency": "runs executing at once per partition= value",
}


def queue_dict(info: QueueInfo) -> dict[str, Any]:
    """The JSON form of a queue."""
    return {
        "name": info.name,
        "concurrency": info.concurrency,
        "per_worker": info.per_worker,
        "rate": info.rate,
        "partition_concurrency": info.partition_concurrency,
    }
