"""How a mailbox entry reads: in `cairn runs show`, on the run page and in its bars."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from cairn.cli import output
from cairn.dashboard.ui import bars, timeline
from cairn.models import HistoryEntry
from cairn.representation import words
from cairn.runtime import blocking
from cairn.store.records import RunRecord

T0 = 1_700_000_000.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def receive(seq: int, status: str, result: object, end: float | None = 1.0) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        kind="receive",
        name="orders",
        status=status,
        attempts=1,
        started_at=at(0),
        finished_at=None if end is None else at(end),
        result=result,
        key=f"~receive:orders#{seq}",
    )


TOOK = receive(1, "completed", [{"n": 1}, {"n": 2}, {"n": 3}])
ONE = receive(2, "completed", ["a"])
TIMED_OUT = receive(3, "timeout", [])
WAITING = receive(4, "waiting", {"deadline": None, "channel": "event:orders"}, end=None)


def test_received__says_how_many_messages_on_which_topic() -> None:
    assert words.received(TOOK) == "received 3 messages on 'orders'"
    assert words.received(ONE) == "received 1 message on 'orders'"
    assert words.received(TIMED_OUT) == "timed out, no message on 'orders'"
    assert words.received(WAITING) is None  # still waiting: its deadline says more
    assert words.received(HistoryEntry(5, "event", "orders", "completed", 1, None, None)) is None


def test_history_table__a_receive_names_its_messages() -> None:
    console = Console(width=200, record=True)
    console.print(output.history_table([TOOK, TIMED_OUT, WAITING]))
    text = console.export_text()
    assert 'received 3 messages on \'orders\': [{"n": 1}, {"n": 2}, {"n": 3}]' in text
    assert "timed out, no message on 'orders'" in text
    assert "no deadline" in text


def test_run_page__timeline_and_bars_say_what_a_receive_took() -> None:
    shown = timeline.timeline([TOOK, TIMED_OUT], [])
    assert [e["summary"] for e in shown] == [
        "received 3 messages on 'orders'",
        "timed out, no message on 'orders'",
    ]
    assert shown[0]["outcome"] == [{"n": 1}, {"n": 2}, {"n": 3}]
    record = RunRecord(
        run_id="r",
        workflow="w",
        status="COMPLETED",
        args="{}",
        created_at=T0,
        updated_at=T0,
        started_at=T0,
        finished_at=T0 + 2,
    )
    chart = bars.chart(record, [TOOK, TIMED_OUT], [], T0 + 2)
    assert chart is not None
    titles = [bar.title for row in chart["rows"] for bar in row.bars]
    assert any("received 3 messages on 'orders'" in title for title in titles)


def test_waiting__a_parked_receive_waits_for_its_event() -> None:
    record = RunRecord(
        run_id="r1",
        workflow="w",
        status="WAITING",
        args="{}",
        created_at=T0,
        updated_at=T0,
        waiting_for="event:orders",
        waits_on='["event:orders"]',
    )
    assert blocking.reason(record, now=T0) == "event 'orders'"
    assert blocking.awaited_events(record) == ["orders"]


def test_follow__cairn_run_lines_for_a_receive() -> None:
    from cairn.cli import follow

    assert "waiting for messages on 'orders'" in follow.entry_line(WAITING).plain
    assert "received 3 messages on 'orders'" in follow.entry_line(TOOK).plain
    assert "timed out, no message on 'orders'" in follow.entry_line(TIMED_OUT).plain
