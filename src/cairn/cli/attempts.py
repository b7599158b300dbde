"""`cairn runs show`'s failed (interrupted, cancelled) step attempts, fitted to the terminal.

Each attempt keeps to one line when the terminal has room for every error, whole, beside
its facts; on a narrower one (80 columns) its facts take one line and its error's first
line the next ones, wrapped at spaces and indented (see `cli.facts`), instead of each
cell folding over several lines or the error losing its end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from cairn.cli import fit
from cairn.cli.facts import unbroken, wrap
from cairn.representation.words import attempt_outcome, seconds, when
from cairn.store.records import CANCELLED, INTERRUPTED

# heading -> (least width it may be cut to, None: never cut; rank; ample), see fit.Want
FACTS: dict[str, tuple[int | None, int, int | None]] = {
    "KEY": (12, 0, 16),
    "ATTEMPT": (None, 0, None),
    "ENDED AT": (None, 0, None),
    "WORKER": (12, 1, 16),
    "RETRY": (None, 2, None),
}
RIGHT = ("ATTEMPT",)
INDENT = "  "
CONTINUED = "    "  # an error's lines after its first


def error_text(attempt: Mapping[str, Any]) -> str:
    """How the attempt ended: its error's type and first line (`…` when more follow)."""
    if attempt.get("outcome") in (INTERRUPTED, CANCELLED):
        return attempt_outcome(attempt)
    lines = [line for line in str(attempt.get("message") or "").splitlines() if line.strip()]
    first = " ".join(lines[0].split()) if lines else ""
    more = " …" if len(lines) > 1 else ""
    kind = str(attempt.get("error_type") or "")
    return f"{kind}: {first}{more}" if kind and first else (kind or first) + more


def retry_text(attempt: Mapping[str, Any]) -> str:
    """When the step was tried again: `after 2.00s` (from the attempt's end), or why not."""
    if attempt.get("outcome") == INTERRUPTED:
        return "ran again"
    retry_at, ended = attempt.get("retry_at"), attempt.get("failed_at")
    if retry_at is None:
        return "no retry"
    if ended is None:
        return when(retry_at)
    return f"after {seconds(max(0.0, (retry_at - ended).total_seconds()))}"


class AttemptsTable:
    """The attempts of one execution: KEY, ATTEMPT, ENDED AT, WORKER, RETRY and the error."""

    def __init__(self, attempts: Iterable[Mapping[str, Any]], above: str = "") -> None:
        """`above`: the run's error, printed whole above the table.

        An attempt's error that it holds is named by its type alone, as on the dashboard.
        """
        self.rows: list[tuple[dict[str, str], Text]] = []
        for attempt in attempts:
            quiet = attempt.get("outcome") in (INTERRUPTED, CANCELLED)
            text, kind = error_text(attempt), str(attempt.get("error_type") or "")
            if not quiet and kind and text != kind and text in above:
                text = f"{kind} (the error above)"
            facts = {
                "KEY": str(attempt["key"]),
                "ATTEMPT": str(attempt["attempt"]),
                "ENDED AT": when(attempt["failed_at"]),
                "WORKER": str(attempt.get("worker") or ""),
                "RETRY": retry_text(attempt),
            }
            self.rows.append((facts, Text(text, style="yellow" if quiet else "red")))

    def _wants(self, names: Iterable[str]) -> list[fit.Want]:
        wants = []
        for name in names:
            least, rank, ample = FACTS[name]
            natural = max([len(name), *(len(facts[name]) for facts, _ in self.rows)])
            wants.append(fit.Want(name, natural, natural if least is None else least, rank, ample))
        return wants

    def renderables(self, width: int) -> list[Table | Text]:
        """The table for a console `width` characters wide (a Table, or lines of Text)."""
        names = [n for n in FACTS if n != "WORKER" or any(f["WORKER"] for f, _ in self.rows)]
        error_natural = max([len("ERROR"), *(e.cell_len for _, e in self.rows)])
        error = fit.Want("ERROR", error_natural, error_natural, 3)  # whole, or below
        wants = self._wants(names)
        beside = fit.fit([*wants, error], width)
        if "ERROR" in beside and sum(beside.values()) + 2 * (len(beside) - 1) <= width:
            table = Table(box=None, header_style="bold", pad_edge=False)
            for name, size in beside.items():
                justify: Any = "right" if name in RIGHT else "left"
                table.add_column(
                    name, width=size, justify=justify, no_wrap=True, overflow="ellipsis"
                )
            for facts, text in self.rows:
                table.add_row(*(text if name == "ERROR" else facts[name] for name in beside))
            return [table]
        widths = fit.fit(wants, width)
        lines: list[Table | Text] = [self._line({n: n for n in widths}, widths, style="bold")]
        for facts, text in self.rows:
            lines.append(self._line(facts, widths))
            room = width - len(INDENT)
            for i, part in enumerate(wrap(text, room, room - len(CONTINUED) + len(INDENT))):
                lines.append(unbroken(Text(CONTINUED if i else INDENT) + part))
        return lines

    @staticmethod
    def _line(cells: Mapping[str, str], widths: Mapping[str, int], style: str = "") -> Text:
        line = Text(style=style)
        for i, (name, size) in enumerate(widths.items()):
            cell = Text(cells[name])
            cell.truncate(size, overflow="ellipsis")
            if name in RIGHT:
                cell.pad_left(size - cell.cell_len)
            elif i < len(widths) - 1:
                cell.pad_right(size - cell.cell_len)
            line.append_text(cell if i == 0 else Text("  ") + cell)
        return line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.renderables(options.max_width)
