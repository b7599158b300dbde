"""Rendering for people (rich tables) and for scripts (--json); nothing here touches a database.

The JSON forms and the plain words come from `cairn.representation`, which the dashboard
shares; this module puts them on a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from cairn.cli import fit
from cairn.cli.attempts import AttemptsTable
from cairn.models import HistoryEntry, RunStatus, RunSummary
from cairn.representation.json_form import dumps
from cairn.representation.words import (
    error_line,
    input_text,
    progress_text,
    ran_on,
    received,
    scheduled,
    seconds,
    short,
    span,
    waiting_outcome,
    when,
)
from cairn.store import locations

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


def say(text: str) -> None:
    """Print a message on stdout, its lines unbroken however long.

    The terminal wraps a long one with no newline put in, so an id in it copies whole.
    """
    stdout().print(text, markup=False, soft_wrap=True)


def stderr() -> Console:
    """The console for progress, logs and hints, so stdout stays parseable."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    """Write `error: message` to stderr as exactly one line."""
    sys.stderr.write(f"error: {' '.join(message.split())}\n")
    sys.stderr.flush()


def print_json(value: Any) -> None:
    """Write `value` as indented JSON to stdout."""
    sys.stdout.write(dumps(value) + "\n")
    sys.stdout.flush()


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


def database(url: str) -> str:
    """`url` for printing (no password), with what memory:// and file:/// open."""
    return locations.describe(url, redact(url))


def status_text(status: str) -> Text:
    """A run status, coloured."""
    try:
        style = STATUS_STYLE[RunStatus(status)]
    except ValueError:
        style = ""
    return Text(status, style=style)


def status_cell(run: RunSummary) -> Text:
    """A listed run's status, and `spinning` when it keeps waking without progress."""
    text = status_text(run.status.value)
    if run.spinning:
        text.append(" spinning", style="bold red")
    return text


def cells(text: str | Text) -> int:
    """How many terminal cells `text` takes: an emoji or a CJK character takes two."""
    return text.cell_len if isinstance(text, Text) else cell_len(text)


# heading -> (least width it may be cut to, None: never cut; rank; ample), see fit.Want
Columns = Mapping[str, tuple[int | None, int, int | None]]


class FittedTable:
    """Rows as a table that fits the console's width when printed (see `fit.fit`).

    Rank-0 columns always show (cut no narrower than their least width), the others join
    in rank order while there is room, and long text is cut with an ellipsis, so each row
    keeps to one line at 80 columns as at 200. `optional` columns are left out when no
    row has text in them. `middle` columns (dotted names, ids) are cut in the middle,
    keeping the end that tells `shop.orders.refund` from `shop.orders.charge`.

    A `lead` column (the id the other commands take) is never cut: when it cannot show
    whole beside the rank-0 and rank-1 columns, each row's lead goes on a line of its
    own, the row's other cells indented on the next (`stacked`). A row's note (a run id
    it names) takes a line of its own under the row, indented, never cut.
    """

    def __init__(
        self,
        columns: Columns,
        rows: list[dict[str, str | Text]],
        optional: Iterable[str] = (),
        middle: Iterable[str] = (),
        lead: str | None = None,
        notes: list[str] | None = None,
    ) -> None:
        self.columns = columns
        self.rows = rows
        self.notes = notes or [""] * len(rows)  # a line under a row, whole (an id to copy)
        self.optional = frozenset(optional)
        self.middle = frozenset(middle)
        self.lead = lead

    def _widths(self, width: int, names: Iterable[str], *, whole: bool = False) -> dict[str, int]:
        wants = []
        for name in names:
            least, rank, ample = self.columns[name]
            natural = max([len(name), *(cells(row[name]) for row in self.rows)])
            if name in self.optional and not any(row[name] for row in self.rows):
                continue  # no row has any
            least = natural if least is None or (whole and name == self.lead) else least
            wants.append(fit.Want(name, natural, least, rank, ample))
        return fit.fit(wants, width)

    def stacked(self, width: int) -> bool:
        """Whether rows take two lines: the lead whole, then the rest (see the class)."""
        if self.lead is None:
            return False
        widths = self._widths(width, self.columns, whole=True)
        needed = {
            name
            for name, (_, rank, _) in self.columns.items()
            if rank <= 1 and (name not in self.optional or any(row[name] for row in self.rows))
        }
        return not needed <= set(widths) or sum(widths.values()) + 2 * (len(widths) - 1) > width

    def table(self, width: int) -> Table:
        """The table for a console `width` characters wide (rows of one line)."""
        widths = self._widths(width, self.columns, whole=self.lead is not None)
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name, size in widths.items():
            table.add_column(name, width=size, no_wrap=True, overflow="ellipsis")
        for row in self.rows:
            table.add_row(
                *(
                    fit.elide(row[name], size) if name in self.middle else row[name]
                    for name, size in widths.items()
                )
            )
        return table

    def lines(self, width: int) -> list[Text]:
        """Each row as its lead's line and its other cells' line, indented (`stacked`)."""
        indent = "  "
        rest = [name for name in self.columns if name != self.lead]
        widths = self._widths(width - len(indent), rest)
        out = [Text(str(self.lead), style="bold"), Text(indent) + _line(widths, None, "bold")]
        for row, note in zip(self.rows, self.notes, strict=True):
            lead = row[str(self.lead)]
            out.append(lead.copy() if isinstance(lead, Text) else Text(lead))
            cut = {
                n: fit.elide(row[n], w) if n in self.middle else row[n] for n, w in widths.items()
            }
            out += [Text(indent) + _line(widths, cut), *([Text(indent + note)] if note else [])]
        for line in out:
            line.no_wrap, line.overflow, line.end = True, "ignore", "\n"  # a long lead whole
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.stacked(width):
            yield from self.lines(width)
        else:
            header, *rows = fit.unpadded(console, options, self.table(width))
            yield from header
            for row, note in zip(rows, self.notes, strict=True):  # a row is one line
                yield from [*row, *([Segment(f"  {note}"), Segment.line()] if note else [])]


def _line(widths: Mapping[str, int], row: Mapping[str, str | Text] | None, style: str = "") -> Text:
    """One line of cells `widths` wide, two spaces apart (`row` None: the headings)."""
    line = Text(style=style)
    for i, (name, size) in enumerate(widths.items()):
        value = name if row is None else row[name]
        cell = value.copy() if isinstance(value, Text) else Text(value)
        cell.truncate(size, overflow="ellipsis")
        if i < len(widths) - 1:
            cell.pad_right(size - cell.cell_len)
        line.append_text(cell if i == 0 else Text("  ") + cell)
    line.rstrip()
    return line


def runs_table(runs: Iterable[RunSummary]) -> FittedTable:
    """Listed runs as a table laid out for the console it is printed on.

    RUN ID, WORKFLOW (cut in the middle) and STATUS always show, and ERROR when a run
    has one; the other columns join while there is room (CREATED, VERSION, PROGRESS,
    UPDATED, COLUMNS). A run id is never cut: when ids too long for that leave no room,
    each run's id takes a line of its own (see `FittedTable`). A CONTINUED run's row is
    followed by `continued as new: ID`, as `runs show` and the dashboard say it.
    """
    runs = list(runs)
    return FittedTable(
        RUN_COLUMNS,
        [_run_cells(run) for run in runs],
        RUN_OPTIONAL_TEXT,
        ("WORKFLOW",),
        lead="RUN ID",
        notes=[f"continued as new: {r.continued_to}" if r.continued_to else "" for r in runs],
    )


RUN_COLUMNS: Columns = {
    "RUN ID": (None, 0, None),
    "WORKFLOW": (16, 0, 16),
    "VERSION": (8, 3, 16),
    "STATUS": (None, 0, None),
    "CREATED": (None, 2, None),
    "UPDATED": (None, 5, None),
    "COLUMNS": (12, 6, 24),
    "PROGRESS": (10, 4, 20),
    "ERROR": (16, 1, 30),
}
RUN_OPTIONAL_TEXT = ("VERSION", "COLUMNS", "PROGRESS", "ERROR")  # left out when all empty


def _run_cells(run: RunSummary) -> dict[str, str | Text]:
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


# A history entry's status, coloured: failed red, ended by a cancel yellow, else green.
_ENTRY_STYLE = {"failed": "red", "cancelled": "yellow"}


def history_table(entries: Iterable[HistoryEntry]) -> HistoryTable:
    """A table of a run's durable operations, fitted to the console's width."""
    return HistoryTable(entries)


class HistoryTable:
    """A run's history, one line per entry at any width (the runs table's rules, see fit).

    SEQ, KIND, KEY and STATUS always show; OUTCOME gets room first, then DURATION, STARTED,
    ATTEMPTS and INPUT; long values are cut with an ellipsis instead of wrapping a letter
    per line as they did at 80 columns.
    """

    # heading -> (least width it may be cut to, None: never cut; rank; ample), see fit.Want
    COLUMNS: dict[str, tuple[int | None, int, int | None]] = {
        "SEQ": (None, 0, None),
        "KIND": (None, 0, None),
        "KEY": (12, 0, 28),
        "STATUS": (None, 0, None),
        "ATTEMPTS": (None, 4, None),
        "STARTED": (None, 3, None),
        "DURATION": (None, 2, None),
        "INPUT": (10, 5, 30),
        "OUTCOME": (12, 1, 30),
    }
    RIGHT = ("SEQ", "ATTEMPTS", "DURATION")

    def __init__(self, entries: Iterable[HistoryEntry]) -> None:
        self.rows = [self._cells(entry) for entry in entries]

    @staticmethod
    def _cells(entry: HistoryEntry) -> dict[str, str | Text]:
        failed = entry.status == "failed"
        outcome: str | Text
        outcome = Text(error_line(entry.error), style="red") if failed else short(entry.result, 50)
        took = received(entry)
        where = ran_on(entry) or scheduled(entry)
        if entry.kind == "sleep" and isinstance(entry.result, datetime):
            outcome = f"until {when(entry.result)}"
        elif where is not None:
            outcome = where
        elif entry.status in ("waiting", "cancelled"):  # a wait, open or ended by a cancel
            outcome = waiting_outcome(entry)
        elif took is not None:
            outcome = f"{took}: {short(entry.result, 40)}" if entry.result else took
        return {
            "SEQ": str(entry.seq),
            "KIND": entry.kind,
            "KEY": entry.key or entry.name,
            "STATUS": Text(entry.status, style=_ENTRY_STYLE.get(entry.status, "green")),
            "ATTEMPTS": str(entry.attempts),
            "STARTED": when(entry.started_at),
            "DURATION": seconds(span(entry.started_at, entry.finished_at)),
            # The run's own values: "[hook token]" in an input is text, not markup.
            "INPUT": Text(input_text(entry.input)),
            "OUTCOME": Text(outcome) if isinstance(outcome, str) else outcome,
        }

    def table(self, width: int) -> Table:
        """The table for a console `width` characters wide."""
        wants = []
        for name, (least, rank, ample) in self.COLUMNS.items():
            natural = max([len(name), *(cells(row[name]) for row in self.rows)])
            least = natural if least is None else least
            wants.append(fit.Want(name, natural, least, rank, ample))
        widths = fit.fit(wants, width)
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name, size in widths.items():
            justify: Any = "right" if name in self.RIGHT else "left"
            table.add_column(name, width=size, justify=justify, no_wrap=True, overflow="ellipsis")
        for row in self.rows:
            table.add_row(*(row[name] for name in widths))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in fit.unpadded(console, options, self.table(options.max_width)):
            yield from line


def attempts_table(attempts: Iterable[Mapping[str, Any]], above: str = "") -> AttemptsTable:
    """A table of failed, interrupted and cancelled step attempts, fitted to the console.

    An attempt's error that `above` (the run's error, printed whole) holds is named by its
    type alone: a step's long error was printed once for the run and once per attempt.
    """
    return AttemptsTable(attempts, above)


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
