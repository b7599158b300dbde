"""Public value types: run statuses, run and step facts, summaries and history entries."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cairn.errors import InvalidValue


class RunStatus(enum.StrEnum):
    """The life-cycle state of a run."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SLEEPING = "SLEEPING"
    WAITING = "WAITING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    CONTINUED = "CONTINUED"

    @property
    def finished(self) -> bool:
        """True once the run can no longer change."""
        return self in _FINISHED

    @classmethod
    def parse(cls, value: RunStatus | str) -> RunStatus:
        """Accept the enum or its (case-insensitive) name; ValueError names a bad one."""
        if isinstance(value, RunStatus):
            return value
        try:
            return cls(str(value).upper())
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise InvalidValue(f"unknown run status {value!r} (one of {names})") from None


_FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)

ORIGINS = ("api", "schedule", "trigger", "parent", "continue", "restart", "fork")
"""What can start a run (`RunSummary.origin`): `engine.start` / `Client.start` / the HTTP
API / `cairn run` (api), a schedule's tick, an emit (trigger), a parent (a child run),
`continue_as_new` (continue), `restart` or `fork`."""
UNKNOWN_ORIGIN = "unknown"
"""The origin filter value for runs from before cairn recorded what started them."""


def parse_origin(value: str) -> str:
    """`value` if it is one of ORIGINS or UNKNOWN_ORIGIN (any case); ValueError naming it."""
    found = str(value).strip().lower()
    if found not in (*ORIGINS, UNKNOWN_ORIGIN):
        names = ", ".join((*ORIGINS, UNKNOWN_ORIGIN))
        raise InvalidValue(f"unknown run origin {value!r} (one of {names})")
    return found


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Facts about the current run, from `cairn.current_run()`."""

    run_id: str
    workflow: str
    attempt: int
    started_at: datetime
    parent_id: str | None = None
    scheduled_at: datetime | None = None
    version: str | None = None
    continued_from: str | None = None


SPINNING_AFTER = 10
"""Wake-ups without progress in a minute past which a run is flagged as spinning.

A run that wakes and parks again without recording anything more than this many times
within a minute says so in `RunSummary.waiting_for` (and `futile_wakes`), in the runs
lists, and in the `cairn_runs_spinning` gauge.
"""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """Facts about the step whose code runs now, from `cairn.current_step()`.

    `key` is the step's identity in its run (`charge#2`), `attempt` counts from 1, and
    `idempotency_key` is an opaque string (a UUID) derived from the run id and the key
    alone: the same for every attempt, replay and recovery of this step, and different for
    any other step or run. Pass it to external APIs that deduplicate requests.
    """

    run_id: str
    key: str
    name: str
    attempt: int
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as listed by `engine.list_runs()` (or described by `RunHandle.describe()`).

    `version` is the code version the run started under, `waiting_for` one line saying
    what holds it (None while it executes, is due, or has finished),
    `continued_from` / `continued_to` link the runs of a `continue_as_new` chain.
    `execution` counts its executions (each `retry` begins the next one); a run made by
    `restart` names its source in `restarted_from`, one made by `fork` in `forked_from`
    (with `forked_from_seq`, the history entry it was forked from).
    `started_at` is when a worker first began executing it (None until then), and
    `origin` what started it (one of `ORIGINS`; None for a run from before cairn
    recorded it).
    `futile_wakes` counts the times it woke and parked again without progress in the
    minute before it last parked (0 once it makes progress); past SPINNING_AFTER (10),
    `waiting_for` says the run keeps waking without progress.
    """

    run_id: str
    workflow: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    columns: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] | None = None
    parent_id: str | None = None
    queue: str | None = None
    error: dict[str, Any] | None = None
    version: str | None = None
    waiting_for: str | None = None
    continued_from: str | None = None
    continued_to: str | None = None
    started_at: datetime | None = None
    execution: int = 1
    restarted_from: str | None = None
    forked_from: str | None = None
    forked_from_seq: int | None = None
    origin: str | None = None
    futile_wakes: int = 0

    @property
    def spinning(self) -> bool:
        """True if the run keeps waking without progress (see SPINNING_AFTER)."""
        return self.futile_wakes > SPINNING_AFTER


@dataclass(frozen=True, slots=True)
class EventDelivery:
    """What `send_event` did with an event. The event is kept for the run either way.

    `run_id` is the run that got it (the newest of a `continue_as_new` chain) and
    `status` that run's status when it arrived. `awaited` is True when a wait of the run
    takes the event now: the run was waiting for it and is woken. `waits_for` says what
    a waiting run's open waits take instead (`"event 'approval'"`), empty when the run is
    not waiting. `note` is the plain line to show people when the event is only kept.
    `repeated` is True when the run had this event's `idempotency_key` already (a
    retried send): nothing new is kept, `awaited` is False, and a run that has finished
    since answers so rather than refusing with `RunFinished`.
    """

    run_id: str
    event: str
    status: RunStatus
    awaited: bool
    waits_for: tuple[str, ...] = ()
    repeated: bool = False

    @property
    def note(self) -> str | None:
        """One line when no current wait takes the event (it is kept, or repeated).

        None when a wait takes it now, and for a run that is executing or queued: it may
        wait for it next.
        """
        if self.repeated:
            return (
                f"run {self.run_id} had event {self.event!r} with this idempotency_key "
                "already; nothing new is kept"
            )
        if self.awaited:
            return None
        kept = "the event is kept for a later wait"
        if self.status is RunStatus.WAITING:
            waits = " or ".join(self.waits_for) or "something else"
            return (
                f"run {self.run_id} is not waiting for event {self.event!r} "
                f"(it waits for {waits}); {kept}"
            )
        if self.status is RunStatus.SLEEPING:
            return f"run {self.run_id} is sleeping, not waiting for event {self.event!r}; {kept}"
        if self.status is RunStatus.PAUSED:
            return f"run {self.run_id} is paused; {kept} once it is resumed"
        return None


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of runs; pass `next_cursor` back as `cursor` for the next page."""

    runs: list[RunSummary]
    next_cursor: str | None = None

    def __iter__(self) -> Iterator[RunSummary]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, index: int) -> RunSummary:
        return self.runs[index]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One durable operation of a run, as shown by `engine.history()`.

    For a step, `started_at` and `finished_at` are those of the attempt that produced its
    outcome (earlier failed attempts are listed apart, each with its own start), and
    `input` is what it was called with: `{"args": [...], "kwargs": {...}}`, or
    `{"omitted": "<why>"}` when the arguments could not be serialized or came to more
    than 64 KiB as JSON. `input` is None for other kinds of entry and for steps recorded
    before cairn kept inputs.

    `execution` is the execution of the run that recorded the entry (1, then one more for
    each `retry`). An entry is `superseded` when a retry took it out of the run's journal
    to run its step again: a failure kept for the record, which replay does not visit.

    A sleep's `result` is its wake time (a `datetime`), its `finished_at` when it ended
    (that time, or when its run ended if sooner), and its `status` is "sleeping" until
    then. A `cairn.receive` is kind "receive", named by its topic: its `result` is the
    list of payloads it took, or `[]` with status "timeout".
    """

    seq: int
    kind: str
    name: str
    status: str
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    result: Any = None
    error: dict[str, Any] | None = None
    key: str = ""
    input: Any = None
    execution: int = 1
    superseded: bool = False


@dataclass(frozen=True, slots=True)
class Execution:
    """One execution of a run: who began it, when, why, and from which history entry on.

    `cause` is "start" (the run was started), "retry", or "restart" / "fork" for the first
    execution of a copy of another run. `by` is the name the caller gave, if any.
    `from_seq` is the first history entry the execution recorded itself (a retried run
    replays the entries before it).
    """

    number: int
    started_at: datetime
    cause: str
    by: str | None = None
    from_seq: int = 1


class History(list[HistoryEntry]):
    """A run's history entries, with what replaying them needs: the workflow and input."""

    def __init__(
        self,
        entries: list[HistoryEntry] | tuple[HistoryEntry, ...] = (),
        *,
        run_id: str = "",
        workflow: str = "",
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        executions: list[Execution] | None = None,
        next_after: int | None = None,
    ) -> None:
        super().__init__(entries)
        self.run_id = run_id
        self.workflow = workflow
        self.args = args
        self.kwargs = dict(kwargs or {})
        # Every execution of the run, by number (entries name theirs in `execution`).
        self.executions = list(executions or ())
        # For one page of a long history: the `after` of the next page; None on the last.
        self.next_after = next_after


@dataclass(frozen=True, slots=True)
class StreamReset:
    """A stream reader's marker: the chunks step `step_key`'s attempt `attempt` wrote are void.

    The attempt failed or its worker died; the step's next attempt streams again.
    """

    attempt: int
    step_key: str
