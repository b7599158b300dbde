"""How a `schedule_workflow` entry reads: in `cairn runs show`, on the run page, in bars."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from cairn.cli import output
from cairn.dashboard.ui import bars, run, timeline
from cairn.models import HistoryEntry
from cairn.representation import words
from cairn.store.records import RunRecord

T0 = datetime(2025, 6, 1, tzinfo=UTC)


def scheduled(seq: int, run_at: str | None) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        kind="schedule",
        name="annual_review",
        status="completed",
        attempts=1,
        started_at=T0,
        finished_at=T0,
        result={"run_id": f"p/schedule:annual_review#{seq}", "workflow": "annual_review",
                "run_at": run_at},
        key=f"~schedule:annual_review#{seq}",
        input={"args": [2026], "kwargs": {}},
    )  # fmt: skip


LATER = scheduled(1, "2026-01-01T00:00:00+00:00")
NOW = scheduled(2, None)
NEW_YEAR = words.when(datetime(2026, 1, 1, tzinfo=UTC))


def test_scheduled__names_the_run_and_when_it_starts() -> None:
    assert words.scheduled(LATER) == (
        f"run p/schedule:annual_review#1 of 'annual_review', starts {NEW_YEAR}"
    )
    assert words.scheduled(NOW) == (
        "run p/schedule:annual_review#2 of 'annual_review', starts at once"
    )
    assert words.scheduled(HistoryEntry(3, "step", "x", "completed", 1, T0, T0, {})) is None


def test_history_table__a_scheduled_start_reads_as_words() -> None:
    console = Console(width=220, record=True)
    console.print(output.history_table([LATER, NOW]))
    text = console.export_text()
    assert f"run p/schedule:annual_review#1 of 'annual_review', starts {NEW_YEAR}" in text
    assert "starts at once" in text
    assert "(2026)" in text  # the arguments it was scheduled with


def test_run_page__lists_the_scheduled_run_and_says_what_it_is() -> None:
    assert run.children([LATER]) == [
        {"run_id": "p/schedule:annual_review#1", "workflow": "annual_review", "status": "scheduled"}
    ]
    assert timeline.timeline([LATER], [])[0]["summary"] == words.scheduled(LATER)
    record = RunRecord(
        run_id="p",
        workflow="w",
        status="COMPLETED",
        args="{}",
        created_at=T0.timestamp(),
        updated_at=T0.timestamp(),
        started_at=T0.timestamp(),
        finished_at=T0.timestamp() + 1,
    )
    chart = bars.chart(record, [LATER], [], T0.timestamp() + 1)
    assert chart is not None
    titles = [bar.title for row in chart["rows"] for bar in row.bars]
    assert any(str(words.scheduled(LATER)) in title for title in titles)


def test_follow__cairn_run_line_for_a_scheduled_start() -> None:
    from cairn.cli import follow

    assert "of 'annual_review', starts at once" in follow.entry_line(NOW).plain
