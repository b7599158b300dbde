"""What a run waits for once its time is long past: `(19m ago)`, not `due now`."""

from __future__ import annotations

from cairn.representation import words

WAKE = 1_796_000_000.0


def test_waiting_text__a_sleep_just_due_reads_due_now() -> None:
    text = words.waiting_text({"kind": "sleep", "until": WAKE}, now=WAKE + 1)
    assert text.endswith("(due now)")


def test_waiting_text__a_sleep_long_past_says_how_long_and_what_it_needs() -> None:
    # Before: "(due now)" twenty minutes after its wake time, with no worker serving it.
    text = words.waiting_text({"kind": "sleep", "until": WAKE}, now=WAKE + 19 * 60)
    assert text.endswith("(19m00s ago): a worker to take it (`cairn worker`)"), text


def test_waiting_text__a_task_long_overdue_says_how_long() -> None:
    found = {"kind": "task", "name": "review", "task_id": "t1", "until": WAKE}
    text = words.waiting_text(found, now=WAKE + 3600)
    assert text == f"human task 'review' (task t1), due {words.when(WAKE)} (1h00m ago)"
