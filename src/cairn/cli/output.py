"""Rendering for people (rich tables) and for scripts (--json); nothing here touches a database.

JSON output turns cairn's rich values into plain JSON: datetimes as ISO 8601 text in UTC,
Decimal and UUID as strings, bytes as base64, sets and tuples as lists, dataclasses and
pydantic models as objects.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import os
import sys
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from cairn.cli import fit
from cairn.core import mailbox, remote_steps
from cairn.models import Execution, HistoryEntry, RunStatus, RunSummary
from cairn.store.records import INTERRUPTED

STATUS_STYLE = {
    RunStatus.PENDING: "yellow",
    RunStatus.RUNNING: "cyan",
    RunStatus.SLEEPING: "blue",
    RunStatus.WAITING: "blue",
    RunStatus.PAUSED: "magenta",
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "red",
    RunStatus.CONTINUED: "green",
}


def stdout() -> Console:
    """The console for results; piped output gets wide lines instead of folded cells."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200
    return console


def stderr() -> Console:
    """The console for progress, logs and hints, so stdout stays parseable."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    """Write `error: message` to stderr as exactly one line."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()


def jsonable(value: Any) -> Any:
    """`value` made of JSON types only (see the module docstring for the mapping)."""
    kind = type(value)  # the plain types first: histories are mostly made of them
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, datetime):
        return (value if value.tzinfo is None else value.astimezone(UTC)).isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        items = [jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(mode="json"))
    return repr(value)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """JSON text of `value`, its rich values converted as `jsonable` converts them."""
    try:
        # The C encoder walks the plain data; `jsonable` sees only what it cannot encode.
        return json.dumps(
            value, indent=indent, ensure_ascii=False, allow_nan=False, default=jsonable
        )
    except (ValueError, TypeError):  # NaN or infinity, or a key that is not text or a number
        return json.dumps(jsonable(value), indent=indent, ensure_ascii=False)


def print_json(value: Any) -> None:
    """Write `value` as indented JSON to stdout."""
    sys.stdout.write(dumps(value) + "\n")
    sys.stdout.flush()


def short(value: Any, width: int = 60) -> str:
    """Compact one-line JSON of `value`, clipped to `width` characters."""
    text = dumps(value, indent=None)
    return text if len(text) <= width else text[: width - 1] + "…"


def when(moment: datetime | float | None) -> str:
    """A timestamp for people: local time to the second."""
    if moment is None:
        return ""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: float | None) -> str:
    """A duration for people: `850µs`, `12ms`, `1.24s`, `3m05s`, `2h01m`."""
    if value is None:
        return ""
    if value < 0.001:
        return f"{value * 1e6:.0f}µs"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    if value < 60:
        return f"{value:.2f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def span(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from `start` to `end`, or None if either is missing."""
    return None if start is None or end is None else (end - start).total_seconds()


def redact(url: str) -> str:
    """`url` with any password replaced by `***`, for printing."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def status_text(status: str) -> Text:
    """A run status, coloured."""
    try:
        style = STATUS_STYLE[RunStatus(status)]
    except ValueError:
        style = ""
    return Text(status, style=style)


def error_line(error: Mapping[str, Any] | None) -> str:
    """`type: message` of a stored error (run, step or attempt), on one line."""
    if not error:
        return ""
    message = " ".join(str(error.get("message", "")).split())
    kind = error.get("error_type") or error.get("type") or ""
    if kind in _SELF_DESCRIBING:
        return message  # "step 'charge' failed after 3 attempt(s): builtins.ValueError: ..."
    return f"{kind}: {message}" if kind else message


_SELF_DESCRIBING = frozenset({"cairn.errors.StepFailed", "cairn.errors.StepTimeout"})


def summary_dict(run: RunSummary) -> dict[str, Any]:
    """The JSON form of a listed run."""
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "status": run.status.value,
        "created_at": jsonable(run.created_at),
        "updated_at": jsonable(run.updated_at),
        "started_at": jsonable(run.started_at),
        "columns": jsonable(run.columns),
        "progress": jsonable(run.progress),
        "parent_id": run.parent_id,
        "queue": run.queue,
        "error": jsonable(run.error),
        "version": run.version,
        "waiting_for": run.waiting_for,
        "continued_from": run.continued_from,
        "continued_to": run.continued_to,
        "execution": run.execution,
        "restarted_from": run.restarted_from,
        "forked_from": run.forked_from,
        "forked_from_seq": run.forked_from_seq,
        "origin": run.origin,
        "futile_wakes": run.futile_wakes,
    }


def entry_dict(entry: HistoryEntry) -> dict[str, Any]:
    """The JSON form of a history entry."""
    return {
        "seq": entry.seq,
        "key": entry.key,
        "kind": entry.kind,
        "name": entry.name,
        "status": entry.status,
        "attempts": entry.attempts,
        "started_at": jsonable(entry.started_at),
        "finished_at": jsonable(entry.finished_at),
        "duration": span(entry.started_at, entry.finished_at),
        "input": jsonable(entry.input),
        "result": jsonable(entry.result),
        "error": jsonable(entry.error),
        "execution": entry.execution,
        "superseded": entry.superseded,
    }


def execution_dict(execution: Execution) -> dict[str, Any]:
    """The JSON form of one execution of a run."""
    return {
        "execution": execution.number,
        "cause": execution.cause,
        "by": execution.by,
        "started_at": jsonable(execution.started_at),
        "from_seq": execution.from_seq,
    }


_CAUSES = {"start": "started", "retry": "after retry", "restart": "a restart", "fork": "a fork"}


def execution_label(execution: Execution, *, named: bool = True) -> str:
    """`execution 2, after retry by ada at 2026-03-01 10:00:00`, for people.

    Without `named`, the same without the leading "execution ".
    """
    cause = _CAUSES.get(execution.cause, execution.cause)
    by = f" by {execution.by}" if execution.by else ""
    label = f"{execution.number}, {cause}{by} at {when(execution.started_at)}"
    return f"execution {label}" if named else label


def attempt_outcome(attempt: Mapping[str, Any]) -> str:
    """How a failed or interrupted attempt ended, on one line.

    `interrupted (worker w-1, started 2026-03-01 10:00:00)`: its worker died or lost the
    run while it ran, so it may have run in part or in full.
    """
    if attempt.get("outcome") == INTERRUPTED:
        started = attempt.get("started_at")
        since = f", started {when(started)}" if started is not None else ""
        return f"interrupted (worker {attempt.get('worker') or 'unknown'}{since})"
    return error_line(attempt)


def progress_text(progress: Mapping[str, Any] | None, status: str | None = None) -> str:
    """`loading rows · 40/100 (40%)`; empty when there is no progress.

    A COMPLETED run's progress is shown as final, `done (last: loading rows)`: the count
    it last reported (1/2, say) would read as unfinished work.
    """
    if not progress:
        return ""
    message = " ".join(str(progress.get("message") or "").split())
    if status == RunStatus.COMPLETED.value:
        return f"done (last: {message})" if message else "done"
    current, total = progress.get("current"), progress.get("total")
    count = ""
    if isinstance(current, int | float) and isinstance(total, int | float) and total > 0:
        count = f"{current:g}/{total:g} ({current / total:.0%})"
    elif isinstance(current, int | float):
        count = f"{current:g}"
    return " · ".join(part for part in (message, count) if part)


def progress_percent(progress: Mapping[str, Any] | None, status: str | None = None) -> int | None:
    """How far a progress count got, 0 to 100 (100 once the run COMPLETED); None without one."""
    progress = progress or {}
    current, total = progress.get("current"), progress.get("total")
    if not (isinstance(current, int | float) and isinstance(total, int | float) and total > 0):
        return None
    if status == RunStatus.COMPLETED.value:
        return 100
    return max(0, min(100, round(100 * current / total)))


def status_cell(run: RunSummary) -> Text:
    """A listed run's status, and `spinning` when it keeps waking without progress."""
    text = status_text(run.status.value)
    if run.spinning:
        text.append(" spinning", style="bold red")
    return text


def runs_table(runs: Iterable[RunSummary]) -> RunsTable:
    """A table of listed runs, laid out for the console it is printed on (see RunsTable)."""
    return RunsTable(runs)


class RunsTable:
    """Listed runs as a table that fits the console's width when printed.

    RUN ID, WORKFLOW and STATUS always show, whole (a run id is cut only past 32
    characters); the other columns join while there is room (ERROR first, then CREATED,
    VERSION, PROGRESS, UPDATED, COLUMNS), and long text is cut with an ellipsis, so each
    run keeps to one line at 80 columns as at 200.
    """

    # heading -> (least width it may be cut to, None: never cut; rank; ample), see fit.Want
    COLUMNS: dict[str, tuple[int | None, int, int | None]] = {
        "RUN ID": (32, 0, None),
        "WORKFLOW": (16, 0, None),
        "VERSION": (8, 3, 16),
        "STATUS": (None, 0, None),
        "CREATED": (None, 2, None),
        "UPDATED": (None, 5, None),
        "COLUMNS": (12, 6, 24),
        "PROGRESS": (10, 4, 20),
        "ERROR": (16, 1, 30),
    }
    OPTIONAL_TEXT = ("VERSION", "COLUMNS", "PROGRESS", "ERROR")  # left out when all empty

    def __init__(self, runs: Iterable[RunSummary]) -> None:
        self.rows = [self._cells(run) for run in runs]

    @staticmethod
    def _cells(run: RunSummary) -> dict[str, str | Text]:
        return {
            "RUN ID": run.run_id,
            "WORKFLOW": run.workflow,
            "VERSION": run.version or "",
            "STATUS": status_cell(run),
            "CREATED": when(run.created_at),
            "UPDATED": when(run.updated_at),
            "COLUMNS": " ".join(f"{k}={short(v, 30)}" for k, v in run.columns.items()),
            "PROGRESS": progress_text(run.progress, run.status.value),
            "ERROR": error_line(run.error),
        }

    def table(self, width: int) -> Table:
        """The table for a console `width` characters wide."""
        wants = []
        for name, (least, rank, ample) in self.COLUMNS.items():
            natural = max([len(name), *(len(row[name]) for row in self.rows)])
            if name in self.OPTIONAL_TEXT and not any(row[name] for row in self.rows):
                continue  # no run has any
            least = natural if least is None else least
            wants.append(fit.Want(name, natural, least, rank, ample))
        widths = fit.fit(wants, width)
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name, size in widths.items():
            table.add_column(name, width=size, no_wrap=True, overflow="ellipsis")
        for row in self.rows:
            table.add_row(*(row[name] for name in widths))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)


def history_table(entries: Iterable[HistoryEntry]) -> Table:
    """A table of a run's durable operations."""
    table = Table(box=None, header_style="bold", pad_edge=False, title_justify="left")
    names = ("SEQ", "KIND", "KEY", "STATUS", "ATTEMPTS", "STARTED", "DURATION", "INPUT", "OUTCOME")
    for name in names:
        justify: Any = "right" if name in ("SEQ", "ATTEMPTS", "DURATION") else "left"
        wraps = name in ("INPUT", "OUTCOME")
        table.add_column(name, justify=justify, overflow="ellipsis", no_wrap=not wraps)
    for entry in entries:
        failed = entry.status == "failed"
        outcome = Text(error_line(entry.error), style="red") if failed else short(entry.result, 50)
        took = received(entry)
        where = ran_on(entry)
        if entry.kind == "sleep" and isinstance(entry.result, datetime):
            outcome = f"until {when(entry.result)}"
        elif where is not None:
            outcome = where
        elif entry.status == "waiting":
            outcome = waiting_outcome(entry)
        elif took is not None:
            outcome = f"{took}: {short(entry.result, 40)}" if entry.result else took
        table.add_row(
            str(entry.seq),
            entry.kind,
            entry.key or entry.name,
            Text(entry.status, style="red" if failed else "green"),
            str(entry.attempts),
            when(entry.started_at),
            seconds(span(entry.started_at, entry.finished_at)),
            # The run's own values: "[hook token]" in an input is text, not markup.
            Text(input_text(entry.input)),
            Text(outcome) if isinstance(outcome, str) else outcome,
        )
    return table


def input_text(value: Any, width: int = 40) -> str:
    """A step's input as the call's arguments, `(1, "a", retry=True)`, clipped to `width`.

    Empty for operations without one (sleeps, waits) and for steps recorded before inputs
    were kept; an input too large or unserializable to keep shows why it was omitted.
    """
    if not isinstance(value, Mapping):
        return ""
    if "omitted" in value:
        text = f"(omitted: {value['omitted']})"
    else:
        args = [dumps(arg, indent=None) for arg in value.get("args") or ()]
        args += [f"{k}={dumps(v, indent=None)}" for k, v in (value.get("kwargs") or {}).items()]
        text = f"({', '.join(args)})"
    return text if len(text) <= width else text[: width - 1] + "…"


def received(entry: HistoryEntry) -> str | None:
    """What a mailbox entry took, in words: "received 3 messages on 'orders'".

    None for other entries, and for a receive still waiting.
    """
    if entry.kind != mailbox.KIND or not isinstance(entry.result, list):
        return None
    if entry.status == "timeout":
        return f"timed out, no message on {entry.name!r}"
    count = len(entry.result)
    return f"received {count} message{'' if count == 1 else 's'} on {entry.name!r}"


def ran_on(entry: HistoryEntry) -> str | None:
    """Where an attempt sent to a step queue ran, in words; None for other entries.

    "on worker W of step queue 'gpu': completed" (or "failed: ..."); a report still
    awaited says where it was sent.
    """
    if entry.kind != remote_steps.REMOTE or not isinstance(entry.result, dict):
        return None
    facts = entry.result
    if entry.status == "waiting":
        return f"sent to step queue {facts.get('queue')!r}"
    verdict = "completed"
    if not facts.get("ok"):
        verdict = f"failed: {error_line(facts.get('failure') or {})}"
    return f"on worker {facts.get('worker')} of step queue {facts.get('queue')!r}: {verdict}"


def waiting_outcome(entry: HistoryEntry) -> str:
    """What an unfinished wait records: its task and deadline (never a hook's token)."""
    facts = entry.result if isinstance(entry.result, dict) else {}
    parts = []
    if facts.get("task_id"):
        parts.append(f"task {facts['task_id']}")
    if isinstance(facts.get("deadline"), int | float):
        parts.append(f"until {when(facts['deadline'])}")
    return ", ".join(parts) or "no deadline"


def attempts_table(attempts: Iterable[Mapping[str, Any]]) -> Table:
    """A table of failed and interrupted step attempts."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("KEY", "ATTEMPT", "ENDED AT", "ERROR", "RETRY AT"):
        table.add_column(name, justify="right" if name == "ATTEMPT" else "left")
    for attempt in attempts:
        interrupted = attempt.get("outcome") == INTERRUPTED
        table.add_row(
            attempt["key"],
            str(attempt["attempt"]),
            when(attempt["failed_at"]),
            Text(attempt_outcome(attempt), style="yellow" if interrupted else "red"),
            "ran again" if interrupted else (when(attempt["retry_at"]) or "no retry"),
        )
    return table


def executing_table(steps: Iterable[Mapping[str, Any]], *, now: float) -> Table:
    """A table of the step attempts executing now, with their worker's last heartbeat."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("KEY", "ATTEMPT", "STARTED", "WORKER", "LAST HEARTBEAT"):
        justify: Any = "right" if name == "ATTEMPT" else "left"
        table.add_column(name, justify=justify, overflow="fold")  # a worker id in full
    for step in steps:
        beat = step["heartbeat_at"]
        ago = f" ({seconds(max(0.0, now - beat.timestamp()))} ago)" if beat is not None else ""
        table.add_row(
            step["key"],
            str(step["attempt"]),
            when(step["started_at"]),
            step["worker"],
            when(beat) + ago,
        )
    return table
