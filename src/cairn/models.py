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
        raise ValueError(f"unknown run origin {value!r} (one of {names})")
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


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as listed by `engine.list_runs()` (or described by `RunHandle.describe()`).

    `version` is the code version the run started under, `waiting_for` one line saying
    what holds it (None while it executes, is due, or has finished),
    `continued_from` / `continued_to` link the runs of a `continue_as_new` chain, and
    `started_at` is when a worker first began executing it (None until then), and
    `origin` what started it (one of `ORIGINS`; None for a run from before cairn
    recorded it).
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
    origin: str | None = None


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
