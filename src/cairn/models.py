"""Public value types: run statuses, run summaries and history entries."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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
            raise ValueError(f"unknown run status {value!r} (one of {names})") from None


_FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)


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
class RunSummary:
    """One run as listed by `engine.list_runs()` (or described by `RunHandle.describe()`).

    `version` is the code version the run started under, `waiting_for` one line saying
    what holds it (None while it executes, is due, or has finished),
    `continued_from` / `continued_to` link the runs of a `continue_as_new` chain, and
    `started_at` is when a worker first began executing it (None until then).
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
    """

    run_id: str
    event: str
    status: RunStatus
    awaited: bool
    waits_for: tuple[str, ...] = ()

    @property
    def note(self) -> str | None:
        """One line when no current wait takes the event (it is kept), else None.

        None too for a run that is executing or queued: it may wait for it next.
        """
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
    before cairn kept inputs. A sleep's `result` is its wake time (a `datetime`), its
    `finished_at` when it ended (that time, or when its run ended if sooner), and its
    `status` is "sleeping" until then.
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
    ) -> None:
        super().__init__(entries)
        self.run_id = run_id
        self.workflow = workflow
        self.args = args
        self.kwargs = dict(kwargs or {})
