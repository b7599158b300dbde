"""The live view of one run for `cairn run`: each step and progress message as it comes.

It polls the store every `interval` seconds (a burst of progress updates shows its
latest) and wakes at once when the run finishes here. It only reads; the engine executes.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from cairn.cli import attempts
from cairn.cli.facts import unbroken, wrap
from cairn.core import mailbox
from cairn.models import HistoryEntry, RunStatus
from cairn.representation import words
from cairn.runtime.control import RunControl
from cairn.store.records import CANCELLED, INTERRUPTED, RunRecord

ACTIVE = frozenset({RunStatus.RUNNING})
WHOLE = " " * 10  # the indent of an error printed whole under the line that cut it


class Follower:
    """Prints what a run records that it has not printed yet."""

    def __init__(self, control: RunControl, run_id: str, console: Console) -> None:
        self.control = control
        self.run_id = run_id
        self.console = console
        self._steps: set[int] = set()
        self._attempts: set[tuple[str, int]] = set()
        self._progress: str | None = None
        self.progress = ""
        self._whole: set[str] = set()  # errors printed whole: a cut line then refers to them
        # On a terminal (or with COLUMNS set) each line is cut at the width; a log keeps all.
        self.fitted = console.is_terminal or "COLUMNS" in os.environ

    async def poll(self) -> RunRecord:
        """Print new history entries and failed attempts; returns the run as read first."""
        # Status first, history second: when the status says finished, the history is whole.
        run = await self.control.record(self.run_id)
        lines: list[tuple[datetime | None, int, Text, str]] = []
        for attempt in await self.control.attempts(self.run_id):
            mark = (attempt["key"], attempt["attempt"])
            if mark not in self._attempts:
                self._attempts.add(mark)
                width = self.console.width if self.fitted else None
                stopped = attempt.get("outcome") in (INTERRUPTED, CANCELLED)  # no error
                full = "" if stopped else words.error_line(attempt)
                lines.append((attempt["failed_at"], 0, attempt_line(attempt, width), full))
        for entry in await self.control.history(self.run_id):
            if entry.seq not in self._steps:
                self._steps.add(entry.seq)
                lines.append((entry.finished_at, 1, entry_line(entry), _failure(entry)))
        if run.progress is not None and run.progress != self._progress:
            self._progress = run.progress
            update = progress_line(json.loads(run.progress))
            # A run replayed after a sleep reports its progress again: shown once.
            if update is not None and update[1] != self.progress:
                moment, self.progress = update
                lines.append((moment, 2, Text(f"        … {self.progress}", style="cyan"), ""))
        for _, _, line, error in sorted(lines, key=_order):
            self.show(line, error)
        return run

    def show(self, line: Text, error: str) -> None:
        """Print `line`; cut at the terminal's width, its `error` follows whole, once.

        On a terminal each line is one line, so a long error is cut with `…` there (and an
        attempt's line holds its error's first line only): the first line to cut an error
        is followed by the error in full, wrapped and indented, and later lines cutting
        the same error refer to it. No error is lost, and none is printed twice.
        """
        width = self.console.width
        if self.fitted and line.cell_len > width:
            line.truncate(width, overflow="ellipsis")
        self.console.print(line)
        if not error or error in self._whole:
            return
        self._whole.add(error)
        if error in line.plain:
            return
        room = max(20, width - len(WHOLE))
        for part in wrap(Text(error, style="red"), room):
            self.console.print(unbroken(Text(WHOLE) + part))

    async def follow(self, *, interval: float = 0.1) -> RunRecord:
        """Poll until the run stops running here.

        That is: finished, parked, paused, queued, or handed back (queued again: its
        attempt ended early, say because the database failed).

        On a terminal a spinner below the printed steps shows that the run is still going.
        """
        spinner = self.console.status("running", spinner="dots")
        with spinner if self.console.is_terminal else contextlib.nullcontext():
            started = time.monotonic()
            while True:
                run = await self.poll()
                if RunStatus(run.status) not in ACTIVE or run.owner is None:
                    return run  # done here (RUNNING with no owner: handed back, older cairn)
                elapsed = words.seconds(time.monotonic() - started)
                doing = f" · {self.progress}" if self.progress else ""
                spinner.update(f"running step {len(self._steps) + 1}{doing} · {elapsed}")
                try:
                    await self.control.wait(self.run_id, timeout=interval)
                except TimeoutError:
                    pass


def _order(item: tuple[datetime | None, int, Text, str]) -> tuple[float, int]:
    moment, rank, _, _ = item
    return (moment.timestamp() if moment is not None else float("inf"), rank)


def _failure(entry: HistoryEntry) -> str:
    """A failed entry's whole error on one line ("" for any other entry)."""
    return words.error_line(entry.error) if entry.status == "failed" else ""


def progress_line(progress: Any) -> tuple[datetime | None, str] | None:
    """When a progress update was made and its text; None for one with nothing to show."""
    if not isinstance(progress, dict):
        return None
    text = words.progress_text(progress)
    if not text:
        return None
    at = progress.get("at")
    moment = datetime.fromtimestamp(at, UTC) if isinstance(at, int | float) else None
    return moment, text


def entry_line(entry: HistoryEntry) -> Text:
    """One line for a completed (or failed-for-good) durable operation."""
    line = Text(f"{entry.seq:>4}  ")
    line.append(f"{entry.key or entry.name:<24}", style="bold")
    if entry.kind == "sleep":
        wake = entry.result if isinstance(entry.result, datetime) else None
        line.append(f" sleep until {words.when(wake)}", style="blue")
        return line
    if entry.status == "waiting":
        what = f"{entry.kind} {entry.name!r}"
        if entry.kind == mailbox.KIND:
            what = f"messages on {entry.name!r}"
        line.append(f" waiting for {what}", style="blue")
        line.append(f"  {words.waiting_outcome(entry)}", style="dim")
        return line
    failed = entry.status == "failed"
    line.append(" ✗ failed" if failed else " ✓", style="red" if failed else "green")
    if entry.attempts > 1 or failed:
        line.append(f"  {entry.attempts} attempt{'s' if entry.attempts != 1 else ''}")
    line.append(f"  {words.seconds(words.span(entry.started_at, entry.finished_at))}")
    took = words.received(entry) or words.scheduled(entry)
    if failed:
        line.append(f"  {words.error_line(entry.error)}", style="red")
    elif took is not None:
        line.append(f"  {took}", style="dim")
    else:
        line.append(f"  {words.short(entry.result)}", style="dim")
    return line


def attempt_line(attempt: dict[str, Any], width: int | None = None) -> Text:
    """One line for a failed step attempt; its error cut to keep it within `width`."""
    line = Text("        ")
    line.append(f"{attempt['key']} attempt {attempt['attempt']} failed: ", style="yellow")
    retry_at = attempt["retry_at"]
    failed_at = attempt["failed_at"]
    retry = ""
    if retry_at is not None and failed_at is not None:
        retry = f"; retry in {words.seconds((retry_at - failed_at).total_seconds())}"
    error = Text(attempts.error_text(attempt))
    if width is not None:
        if width - line.cell_len - len(retry) < 24:
            retry = ""  # the error's start says more than when the retry comes
        error.truncate(max(12, width - line.cell_len - len(retry)), overflow="ellipsis")
    return line + error + retry
