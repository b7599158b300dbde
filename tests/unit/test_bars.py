"""The run page's compact timeline: bars on one time axis, packed into lanes when long."""

from __future__ import annotations

from datetime import UTC, datetime

from cairn.dashboard.ui import bars
from cairn.models import HistoryEntry
from cairn.store.records import RunRecord

T0 = 1_700_000_000.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def run(finished: float | None = None) -> RunRecord:
    return RunRecord(
        run_id="r",
        workflow="w",
        status="COMPLETED" if finished is not None else "RUNNING",
        args="{}",
        created_at=T0,
        updated_at=T0,
        started_at=T0,
        finished_at=None if finished is None else T0 + finished,
    )


def step(seq: int, start: float, end: float | None, status: str = "completed") -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        kind="step",
        name="load",
        status=status,
        attempts=1,
        started_at=at(start),
        finished_at=None if end is None else at(end),
        key=f"load#{seq}",
    )


def attempt(key: str, n: int, start: float, failed: float, retry: float | None) -> dict:
    return {
        "key": key,
        "attempt": n,
        "error_type": "builtins.TimeoutError",
        "message": "slow",
        "started_at": at(start),
        "failed_at": at(failed),
        "retry_at": None if retry is None else at(retry),
    }


def test_chart__a_row_per_entry_with_each_attempt_and_backoff() -> None:
    entries = [
        step(1, 0, 1),
        step(2, 4, 5),  # after a failed attempt at 1..2 and a backoff to 4
        HistoryEntry(3, "sleep", "sleep", "completed", 1, at(5), at(5), T0 + 8, key="~sleep#1"),
        HistoryEntry(4, "event", "go", "waiting", 1, at(8), None, None, key="~event:go#1"),
    ]
    tries = [attempt("load#2", 1, 1, 2, 4)]

    chart = bars.chart(run(), entries, tries, now=T0 + 10)

    assert chart is not None and not chart["packed"]
    assert [row.label for row in chart["rows"]] == ["load#1", "load#2", "~sleep#1", "~event:go#1"]
    kinds = [[b.kind for b in row.bars] for row in chart["rows"]]
    assert kinds == [["ok"], ["backoff", "ok", "failed"], ["sleep"], ["open"]]
    first, second, sleep, wait = chart["rows"]
    assert (first.bars[0].x, first.bars[0].width) == (0.0, 10.0)  # 0..1 s of 10 s
    failed = second.bars[-1]  # drawn last, never hidden under its backoff
    assert (failed.x, failed.width) == (10.0, 10.0)
    assert "attempt 1 failed: builtins.TimeoutError: slow" in failed.title
    assert (sleep.bars[0].x, sleep.bars[0].width) == (50.0, 30.0)  # until its wake time
    assert (wait.bars[0].x, wait.bars[0].width) == (80.0, 20.0)  # open until now
    assert chart["open"] is True
    assert [t["text"] for t in chart["ticks"]] == [
        "0",
        "+2.00s",
        "+4.00s",
        "+6.00s",
        "+8.00s",
        "+10.00s",
    ]


def test_chart__a_long_sequential_run_packs_into_one_lane() -> None:
    entries = [step(n, n, n + 0.5) for n in range(1, 301)]

    chart = bars.chart(run(finished=301), entries, [], now=T0 + 400)

    assert chart is not None and chart["packed"]
    assert chart["entries"] == 300
    [lane] = chart["rows"]
    # Bars of one kind that touch are drawn as one: a page of a few elements, not 300.
    assert sum(bar.merged for bar in lane.bars) == 300
    assert len(lane.bars) < 10
    assert all(bar.width >= bars.MIN_WIDTH for bar in lane.bars)
    assert lane.bars[0].title.startswith("load#1 … ")
    assert chart["open"] is False


def test_chart__merged_bars_keep_failures_and_retries_apart() -> None:
    entries = [step(n, n, n + 0.5) for n in range(1, 101)]
    entries[49] = step(50, 50.2, 50.5)  # after a failed attempt at 50..50.1, retried
    tries = [attempt("load#50", 1, 50, 50.1, 50.2)]

    chart = bars.chart(run(finished=101), entries, tries, now=T0 + 101)

    assert chart is not None and chart["packed"]
    kinds = [bar.kind for lane in chart["rows"] for bar in lane.bars]
    assert kinds.count("failed") == 1
    assert kinds[-1] == "failed"  # drawn last
    [failed] = [bar for lane in chart["rows"] for bar in lane.bars if bar.kind == "failed"]
    assert "load#50: attempt 1 failed" in failed.title


def test_chart__concurrent_entries_take_lanes_of_their_own() -> None:
    entries = [step(n, n % 3, 10) for n in range(1, 91)]  # 90 at once, three start times

    chart = bars.chart(run(finished=10), entries, [], now=T0 + 10)

    assert chart is not None and chart["packed"]
    assert len(chart["rows"]) == bars.MAX_LANES
    assert sum(bar.merged for lane in chart["rows"] for bar in lane.bars) == 90


def test_chart__nothing_to_draw() -> None:
    assert bars.chart(run(), [], [], now=T0 + 1) is None


def test_chart__steps_back_to_back_to_the_very_end_share_one_lane() -> None:
    # The last bars are kept inside the axis (x clamped): packing goes by true starts.
    entries = [step(n, n * 0.999, (n + 1) * 0.999) for n in range(1, 101)]

    chart = bars.chart(run(finished=101 * 0.999), entries, [], now=T0 + 200)

    assert chart is not None and len(chart["rows"]) == 1
