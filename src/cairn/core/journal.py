"""Step keys, the replay cursor over a run's recorded outcomes, and divergence checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NoReturn

from cairn import limits
from cairn.core.signals import Unwind
from cairn.errors import HistoryTooLong, NonDeterminismError
from cairn.store.records import StepRecord

# Keys of operations that are not user steps carry a prefix no Python name can start with,
# so a step called "sleep" never collides with a durable sleep.
SLEEP = "~sleep"
# Where a cancellation was delivered into the workflow (one entry, kind "cancel"): a replay
# delivers it at the same durable point (see LiveSteps.point), whatever the clock says then.
CANCEL = "~cancel#1"
# check_cancelled() calls in workflow code are durable points too, numbered in order.
CHECK = "~check"


def op_name(kind: str, name: str) -> str:
    """What the keys of a named durable operation count: `~KIND:NAME` (`~event:approval`).

    Live runs and replays both name their waits, children and emits here.
    """
    return f"~{kind}:{name}"


def sleep_name(name: str | None) -> str:
    """What a sleep's keys count: `~sleep`, or `~sleep:NAME` for a named one."""
    return SLEEP if name is None else f"{SLEEP}:{name}"


def step_key(name: str, occurrence: int) -> str:
    """`name#occurrence`, the identity of a durable operation within its run."""
    return f"{name}#{occurrence}"


# How a divergence names the durable work code started where its history holds something
# else. Live runs and replays (`cairn check --db`, `cairn.testing.replay`) both say it here.
STARTED = {
    "step": "started step",
    "sleep": "started sleep",
    "event": "started waiting for event",
    "hook": "created hook",
    "task": "created human task",
    "child": "started child workflow",
    "schedule": "scheduled workflow",
    "emit": "emitted event",
    "receive": "started receiving",
}


def started(kind: str, key: str) -> str:
    """What code did that its history lacks: `started step 'charge#1'`."""
    return f"{STARTED[kind]} {key!r}"


def waited_again(key: str) -> str:
    """A child's result awaited again after a timeout, where the history ends."""
    return f"waited again for child workflow {key!r}"


def describe(record: StepRecord) -> str:
    """How a recorded operation is named in messages."""
    return f"{record.kind} {record.key!r} (history seq {record.seq})"


class Journal:
    """The recorded outcomes of one run and which of them this attempt has replayed."""

    __slots__ = (
        "_leaving",
        "_unvisited",
        "_visits",
        "at_take",
        "cache_keys",
        "cancelled",
        "closed",
        "counters",
        "divergence",
        "elsewhere",
        "max_history",
        "missed",
        "next_seq",
        "overflow",
        "recorded",
        "run_name",
        "warn_history",
    )

    def __init__(
        self,
        records: list[StepRecord],
        *,
        warn_history: int = 10_000,
        max_history: int = 50_000,
        run_name: tuple[str, str] = ("", ""),
        cache_keys: bool = False,
    ) -> None:
        self.recorded = {r.key: r for r in records} if records else {}  # fresh: none
        # Keys are cache keys (WorkflowDef.names_are_cache_keys): new work may start while
        # recorded outcomes remain unvisited; those are left unreached, not a divergence.
        self.cache_keys = cache_keys
        # What the code did where it first met a key its history lacks (cache_keys only):
        # the replay is over there, and what is left stays unreached.
        self.missed: str | None = None
        # Where an earlier attempt delivered a cancellation (not an operation to replay).
        self.cancelled = self.recorded.pop(CANCEL, None)
        # Patch markers are looked up, never required: code that no longer asks skips them.
        self._unvisited = (
            {k: r for k, r in self.recorded.items() if r.kind != "patch"} if self.recorded else {}
        )
        # Called with each key taken, while a recorded cancellation waits for its point.
        self.at_take: Callable[[str], None] | None = None
        # The signal (Suspend, Unwind) the workflow is unwinding with, and in which task.
        self._leaving: tuple[BaseException, asyncio.Task[Any] | None] | None = None
        # Calls so far by name: the next key's number (LiveSteps.call_step reads it too).
        self.counters: dict[str, int] = {}
        self._visits = 0
        self.next_seq = max(r.seq for r in records) + 1 if records else 1
        self.divergence: NonDeterminismError | None = None
        # Set for a run started under another version of the code (core/versions.py): makes
        # the signal that hands the run back for a worker of that version, in place of a
        # divergence, which would fail it.
        self.elsewhere: Callable[[NonDeterminismError], BaseException] | None = None
        # History length limits (cairn.limits); run_name is (run id, workflow) for messages.
        self.warn_history = warn_history
        self.max_history = max_history
        self.run_name = run_name
        # Set when the history would pass max_history: the run fails even if code catches it.
        self.overflow: HistoryTooLong | None = None
        # Set when the attempt ends (or parks): no new durable work may start after that.
        self.closed = False

    def next_key(self, name: str) -> str:
        """The key of the next call of `name` in this run."""
        n = self.counters.get(name, 0) + 1
        self.counters[name] = n
        return f"{name}#{n}"

    def take(self, key: str, kind: str) -> StepRecord | None:
        """The recorded outcome for `key`, marking it replayed; None if it is new work."""
        if not self.recorded:
            if self.at_take is not None:
                self.at_take(key)
            return None
        record = self.recorded.get(key)
        if record is None:
            if self.at_take is not None:
                self.at_take(key)
            return None
        if record.kind != kind:
            self.diverge(
                NonDeterminismError(
                    f"replay met {kind} {key!r} where the history records {describe(record)}",
                    expected=describe(record),
                    met=f"{kind} {key!r}",
                    seq=record.seq,
                )
            )
        if self._unvisited.pop(key, None) is not None:
            self._visits += 1
        if self.at_take is not None:
            self.at_take(key)  # a recorded cancellation is delivered here, once visited
        return record

    def unreached(self) -> list[StepRecord]:
        """The recorded outcomes not replayed so far, in history order."""
        return sorted(self._unvisited.values(), key=lambda r: r.seq)

    def caught_up(self) -> bool:
        """True once every recorded outcome has been replayed (or a cache key missed)."""
        return not self._unvisited or self.missed is not None

    def allocate_seq(self) -> int:
        """The history position of the next new outcome."""
        seq = self.next_seq
        if seq > self.warn_history:
            if seq > self.max_history:
                self.overflow = limits.history_too_long(*self.run_name, self.max_history)
                raise self.overflow
            if seq == self.warn_history + 1:
                limits.warn_history(*self.run_name, seq)
        self.next_seq += 1
        return seq

    @property
    def fatal(self) -> NonDeterminismError | HistoryTooLong | None:
        """What fails the run whatever its code did with it: a divergence, a full history."""
        return self.divergence or self.overflow

    def leaving(self, signal: BaseException, *, by_task: bool = True) -> BaseException:
        """Note that the workflow unwinds with `signal` (parking, or its lease lost); returns it.

        `finally:` blocks run while it unwinds; new durable work there must not start (a
        cleanup step would run at every park): it raises the same signal again, in the
        task that raised it (other branches of a gather unwind). `by_task=False` for a
        sync workflow, whose durable calls each run in a task of their own.
        """
        task = None
        if by_task:
            try:
                task = asyncio.current_task()
            except RuntimeError:
                task = None
        self._leaving = (signal, task)
        return signal

    def raise_if_leaving(self) -> None:
        """Raise the signal the workflow unwinds with, if it does (see `leaving`)."""
        if self._leaving is not None:
            signal, task = self._leaving
            if task is None or task is asyncio.current_task():
                raise signal

    def fresh(self, key: str) -> bool:
        """True if `key` is new work that may start at once, nothing to replay or check.

        Where `take` would find nothing and call nothing, and `open_for_new_work` is True:
        core/common_steps.py asks this instead of those two, for every step.
        """
        return (
            self.at_take is None
            and key not in self.recorded
            and not self.closed
            and not self._unvisited
            and self._leaving is None
        )

    def open_for_new_work(self) -> bool:
        """True if new work may start at once; if not, `check_new_work` decides."""
        return not self.closed and not self._unvisited and self._leaving is None

    async def check_new_work(self, met: str) -> None:
        """Raise NonDeterminismError if new work starts while recorded outcomes remain.

        Branches of an `asyncio.gather` replay concurrently, so first let the event loop
        run until replay stops making progress; only outcomes still unvisited then count.
        Unwinds a branch that goes on after its attempt ended (another branch parked it),
        and re-raises the signal a workflow is unwinding with to code run meanwhile.
        """
        self.refuse_if_leaving()
        await self.check_replayed(met)

    def refuse_if_leaving(self) -> None:
        """Raise the signal the workflow unwinds with, or Unwind once the attempt is over.

        The first half of `check_new_work`, for work decided at its call and written later.
        """
        if self._leaving is not None:
            signal, task = self._leaving
            if task is None or task is asyncio.current_task():
                raise signal
            raise Unwind()  # a sibling branch of a gather: its attempt is over
        if self.closed:
            raise Unwind()

    async def check_replayed(self, met: str) -> None:
        """The second half of `check_new_work`: NonDeterminismError if outcomes remain."""
        if not self._unvisited:
            return
        if self.cache_keys:
            self.missed = self.missed or met
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
        if not self._unvisited:
            return
        if self.cache_keys:
            self.missed = self.missed or met
            return
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
            seq=first.seq,
        )
        self.diverge(error)

    def diverge(self, error: NonDeterminismError) -> NoReturn:
        """Raise `error`, kept so that workflow code catching it cannot hide it.

        The run fails anyway; but a run of another version raises the signal `elsewhere`
        makes of it instead (it is handed back, not failed).
        """
        if self.elsewhere is not None:
            raise self.elsewhere(error)
        self.divergence = error
        raise error
