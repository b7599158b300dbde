"""Step keys, the replay cursor over a run's recorded outcomes, and divergence checks."""

from __future__ import annotations

import asyncio

from cairn.core.signals import Unwind
from cairn.errors import NonDeterminismError
from cairn.store.records import StepRecord

# Keys of operations that are not user steps carry a prefix no Python name can start with,
# so a step called "sleep" never collides with a durable sleep.
SLEEP = "~sleep"


def step_key(name: str, occurrence: int) -> str:
    """`name#occurrence`, the identity of a durable operation within its run."""
    return f"{name}#{occurrence}"


def describe(record: StepRecord) -> str:
    """How a recorded operation is named in messages."""
    return f"{record.kind} {record.key!r} (history seq {record.seq})"


class Journal:
    """The recorded outcomes of one run and which of them this attempt has replayed."""

    __slots__ = (
        "_counters",
        "_unvisited",
        "_visits",
        "closed",
        "divergence",
        "next_seq",
        "recorded",
    )

    def __init__(self, records: list[StepRecord]) -> None:
        self.recorded = {r.key: r for r in records}
        self._unvisited = dict(self.recorded)
        self._counters: dict[str, int] = {}
        self._visits = 0
        self.next_seq = max((r.seq for r in records), default=0) + 1
        self.divergence: NonDeterminismError | None = None
        # Set when the attempt ends (or parks): no new durable work may start after that.
        self.closed = False

    def next_key(self, name: str) -> str:
        """The key of the next call of `name` in this run."""
        n = self._counters.get(name, 0) + 1
        self._counters[name] = n
        return f"{name}#{n}"

    def take(self, key: str, kind: str) -> StepRecord | None:
        """The recorded outcome for `key`, marking it replayed; None if it is new work."""
        if not self.recorded:
            return None
        record = self.recorded.get(key)
        if record is None:
            return None
        if record.kind != kind:
            self.divergence = NonDeterminismError(
                f"replay met {kind} {key!r} where the history records {describe(record)}",
                expected=describe(record),
                met=f"{kind} {key!r}",
            )
            raise self.divergence
        if self._unvisited.pop(key, None) is not None:
            self._visits += 1
        return record

    def caught_up(self) -> bool:
        """True once every recorded outcome has been replayed."""
        return not self._unvisited

    def allocate_seq(self) -> int:
        """The history position of the next new outcome."""
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def open_for_new_work(self) -> bool:
        """True if new work may start at once; if not, `check_new_work` decides."""
        return not self.closed and not self._unvisited

    async def check_new_work(self, met: str) -> None:
        """Raise NonDeterminismError if new work starts while recorded outcomes remain.

        Branches of an `asyncio.gather` replay concurrently, so first let the event loop
        run until replay stops making progress; only outcomes still unvisited then count.
        Unwinds a branch that goes on after its attempt ended (another branch parked it).
        """
        if self.closed:
            raise Unwind()
        if not self._unvisited:
            return
        idle = 0
        seen = self._visits
        while self._unvisited and idle < 3:
            await asyncio.sleep(0)
            if self._visits == seen:
                idle += 1
            else:
                seen, idle = self._visits, 0
        if self._unvisited:
            self.diverged(met)

    def check_finished(self, met: str) -> None:
        """Raise NonDeterminismError if the workflow ends with recorded outcomes unvisited."""
        if self._unvisited:
            self.diverged(met)

    def diverged(self, met: str) -> None:
        """Raise the NonDeterminismError for `met` against the first unvisited outcome."""
        first = next(iter(self._unvisited.values()))
        expected = describe(first)
        error = NonDeterminismError(
            f"workflow code diverged from its history: it {met}, but the history records "
            f"{expected} that replay never reached",
            expected=expected,
            met=met,
        )
        # Kept, so that workflow code catching it cannot hide it: the run fails anyway.
        self.divergence = error
        raise error
