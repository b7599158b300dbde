"""`cairn.Queue`: a named lane for runs with concurrency and rate limits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cairn import durations
from cairn.authoring import registry
from cairn.errors import InvalidValue
from cairn.names import check_queue_name

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\S+)\s*$")

LARGEST_LIMIT = 2**31 - 1
"""The largest a limit or a rate's count can be: the store keeps them in 32-bit columns."""


def parse_rate(rate: str, *, what: str = "rate") -> tuple[int, float]:
    """`"100/1m"` -> (100, 60.0): at most 100 starts in any 60 seconds."""
    match = _RATE.match(rate) if isinstance(rate, str) else None
    if match is None:
        raise InvalidValue(f'invalid {what}: {rate!r} (use COUNT/DURATION, e.g. "100/1m")')
    count = int(match[1])
    period = durations.parse(match[2], what=what).total_seconds()
    if count < 1 or period <= 0:
        raise InvalidValue(f"invalid {what}: {rate!r} (count and period must be positive)")
    if count > LARGEST_LIMIT:
        raise InvalidValue(f"invalid {what}: {rate!r} (the count is {LARGEST_LIMIT} at most)")
    return count, period


def check_limit(value: int | None, what: str) -> int | None:
    """`value` if it is a limit (None, or 1 to LARGEST_LIMIT); ValueError naming `what`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LARGEST_LIMIT:
        raise InvalidValue(
            f"invalid {what}: {value!r} (a positive integer up to {LARGEST_LIMIT}, or None)"
        )
    return value


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue declared in code; limits are stored in the database and changeable live.

    Args:
        name: The queue's name (`@workflow(queue=...)` and `engine.start(queue=...)`).
        concurrency: Runs of this queue executing at once across all workers (None: any).
        per_worker: Runs of this queue executing at once on one worker (None: any).
        rate: At most COUNT starts in any DURATION, as "COUNT/DURATION" (None: no limit).
        partition_concurrency: Runs executing at once per `partition=` value (None: any).
    """

    name: str
    concurrency: int | None = None
    per_worker: int | None = None
    rate: str | None = None
    partition_concurrency: int | None = None
    rate_limit: tuple[int, float] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_queue_name(self.name, "queue name")
        check_limit(self.concurrency, f"concurrency of queue {self.name!r}")
        check_limit(self.per_worker, f"per_worker of queue {self.name!r}")
        check_limit(self.partition_concurrency, f"partition_concurrency of queue {self.name!r}")
        parsed = None
        if self.rate is not None:
            parsed = parse_rate(self.rate, what=f"rate of queue {self.name!r}")
        object.__setattr__(self, "rate_limit", parsed)
        registry.default_registry.add_queue(self)
