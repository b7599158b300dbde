"""Tables of `cairn runs show|list` with wide characters: measured in terminal cells.

Issue 31, item 6: an emoji or a CJK character takes two cells; measured as one character
it pushed its row's later columns right, out of line and past 80 columns.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.cells import cell_len
from rich.console import Console

from cairn.cli import output
from cairn.models import HistoryEntry, RunStatus, RunSummary

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
KEYS = ["send 📨 receipt 📨📨#1", "確認する確認する確認#1", "plain#1"]


def entry(seq: int, key: str) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        kind="step",
        name=key.partition("#")[0],
        status="completed",
        attempts=1,
        started_at=NOW,
        finished_at=NOW,
        result={"note": "済み ✅" * 3},
        key=key,
        input={"args": ["🚚 発送"], "kwargs": {}},
    )


def rendered(table: object, width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(table)
    return captured.get().splitlines()


def column_at(line: str, text: str) -> int:
    """The terminal cell where `text` begins in `line`."""
    return cell_len(line[: line.index(text)])


@pytest.mark.parametrize("width", [80, 120])
def test_history_table__wide_characters_keep_columns_aligned_and_fit(width: int) -> None:
    lines = rendered(output.history_table([entry(i, k) for i, k in enumerate(KEYS, 1)]), width)

    assert len(lines) == 1 + len(KEYS)  # nothing wraps
    for line in lines:
        assert cell_len(line) <= width, line
    status = column_at(lines[0], "STATUS")
    for line in lines[1:]:
        assert column_at(line, "completed") == status, lines


@pytest.mark.parametrize("width", [80, 120])
def test_history_table__a_wide_key_that_fits_is_shown_whole(width: int) -> None:
    # Measured in characters, "🍣🍣🍣🍣#1" (6) got a 7-character column and was cut.
    keys = ["🍣🍣🍣🍣#1", "送信する#1", "go#1"]
    lines = rendered(output.history_table([entry(i, k) for i, k in enumerate(keys, 1)]), width)

    for line, key in zip(lines[1:], keys, strict=True):
        assert f" {key} " in line, lines
        assert cell_len(line) <= width, line


@pytest.mark.parametrize("width", [80, 120])
def test_runs_table__wide_characters_keep_columns_aligned_and_fit(width: int) -> None:
    runs = [
        RunSummary(
            run_id=run_id,
            workflow=workflow,
            status=RunStatus.COMPLETED,
            created_at=NOW,
            updated_at=NOW,
            progress={"message": "積み込み中 🚚🚚", "current": 1, "total": 3},
        )
        for run_id, workflow in (("r-1", "配送.出荷"), ("r-2", "ship.📦"), ("r-3", "ship.plain"))
    ]
    lines = rendered(output.runs_table(runs), width)

    assert len(lines) == 1 + len(runs)
    for line, run in zip(lines[1:], runs, strict=True):
        assert f" {run.workflow} " in line, lines  # whole: it fits
    for line in lines:
        assert cell_len(line) <= width, line
    status = column_at(lines[0], "STATUS")
    for line in lines[1:]:
        assert column_at(line, "COMPLETED") == status, lines
