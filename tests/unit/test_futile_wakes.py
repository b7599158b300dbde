"""Counting a run's wake-ups without progress in a rolling minute."""

from __future__ import annotations

from cairn.core.futile_wakes import WINDOW, FutileWakes


def test_note__counts_parks_without_progress_within_the_window() -> None:
    futile = FutileWakes()

    counts = [futile.note("r1", progressed=False, now=100.0 + i) for i in range(5)]

    assert counts == [1, 2, 3, 4, 5]
    assert futile.note("r2", progressed=False, now=104.0) == 1  # per run


def test_note__older_wakes_leave_the_window() -> None:
    futile = FutileWakes()
    for i in range(3):
        futile.note("r1", progressed=False, now=100.0 + i)

    assert futile.note("r1", progressed=False, now=100.0 + WINDOW + 1.5) == 2  # 102, now


def test_note__progress_forgets_the_count() -> None:
    futile = FutileWakes()
    for i in range(3):
        futile.note("r1", progressed=False, now=100.0 + i)

    assert futile.note("r1", progressed=True, now=104.0) == 0
    assert futile.note("r1", progressed=False, now=105.0) == 1
    futile.forget("r1")
    assert len(futile) == 0


def test_note__runs_not_seen_for_a_window_are_swept() -> None:
    futile = FutileWakes()
    for i in range(300):
        futile.note(f"once-{i}", progressed=False, now=100.0)

    for i in range(300):  # notes a window later sweep the runs seen only before
        futile.note("busy", progressed=False, now=100.0 + WINDOW + 1 + i / 1000)

    assert len(futile) == 1
