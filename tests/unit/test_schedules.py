"""Schedule declarations and tick arithmetic: cron in time zones, intervals, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

import cairn
from cairn.authoring.schedule_ticks import MIN_CATCHUP, ScheduleDef
from cairn.authoring.schedules import define, make_schedule

BERLIN = ZoneInfo("Europe/Berlin")


def ts(
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    *,
    tz: ZoneInfo | None = None,
) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=tz or UTC).timestamp()


def ticks(spec: ScheduleDef, start: float, count: int) -> list[str]:
    """The next `count` ticks after `start`, as local ISO times of the schedule's zone."""
    out = []
    moment = start
    for _ in range(count):
        moment = spec.next_after(moment)
        out.append(datetime.fromtimestamp(moment, spec.zone).isoformat())
    return out


def test_every__ticks_are_multiples_of_the_interval_since_the_epoch() -> None:
    spec = define("wf", every="15m")
    assert spec.every == 900
    start = ts(2024, 5, 1, 10, 7, 30)
    assert spec.next_after(start) == ts(2024, 5, 1, 10, 15)
    assert spec.next_after(ts(2024, 5, 1, 10, 15)) == ts(2024, 5, 1, 10, 30)  # strictly after


def test_every__fractional_interval_never_returns_the_same_tick() -> None:
    spec = define("wf", every=1.5)
    moment = 0.0
    seen = []
    for _ in range(1000):
        nxt = spec.next_after(moment)
        assert nxt > moment
        seen.append(nxt)
        moment = nxt
    assert seen[:3] == [1.5, 3.0, 4.5] and len(set(seen)) == 1000


def test_cron__utc_weekdays() -> None:
    spec = define("wf", cron="0 9 * * 1-5")
    # 2024-05-03 is a Friday: next ticks are Friday 9:00, then Monday 9:00.
    assert ticks(spec, ts(2024, 5, 3, 8), 2) == [
        "2024-05-03T09:00:00+00:00",
        "2024-05-06T09:00:00+00:00",
    ]


def test_cron__read_in_the_time_zone() -> None:
    spec = define("wf", cron="0 9 * * *", tz="Europe/Berlin")
    assert spec.next_after(ts(2024, 1, 10, 12)) == ts(2024, 1, 11, 8)  # CET: UTC+1
    assert spec.next_after(ts(2024, 7, 10, 12)) == ts(2024, 7, 11, 7)  # CEST: UTC+2


def test_cron__spring_forward_skipped_time_ticks_once_at_the_change() -> None:
    # 2024-03-31 in Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    spec = define("wf", cron="30 2 * * *", tz="Europe/Berlin")
    assert ticks(spec, ts(2024, 3, 30, 12, tz=BERLIN), 3) == [
        "2024-03-31T03:00:00+02:00",
        "2024-04-01T02:30:00+02:00",
        "2024-04-02T02:30:00+02:00",
    ]


def test_cron__spring_forward_every_quarter_hour_collapses_the_gap() -> None:
    spec = define("wf", cron="*/15 * * * *", tz="Europe/Berlin")
    assert ticks(spec, ts(2024, 3, 31, 1, 40, tz=BERLIN), 3) == [
        "2024-03-31T01:45:00+01:00",
        "2024-03-31T03:00:00+02:00",  # 02:00-02:45 never happen: one tick at the change
        "2024-03-31T03:15:00+02:00",
    ]


def test_cron__fall_back_fixed_hour_ticks_once() -> None:
    # 2024-10-27 in Berlin: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    spec = define("wf", cron="30 2 * * *", tz="Europe/Berlin")
    assert ticks(spec, ts(2024, 10, 26, 12, tz=BERLIN), 2) == [
        "2024-10-27T02:30:00+02:00",
        "2024-10-28T02:30:00+01:00",
    ]


def test_cron__fall_back_wildcard_hour_follows_elapsed_time() -> None:
    spec = define("wf", cron="*/30 * * * *", tz="Europe/Berlin")
    assert ticks(spec, ts(2024, 10, 27, 1, 10, tz=BERLIN), 6) == [
        "2024-10-27T01:30:00+02:00",
        "2024-10-27T02:00:00+02:00",
        "2024-10-27T02:30:00+02:00",
        "2024-10-27T02:00:00+01:00",
        "2024-10-27T02:30:00+01:00",
        "2024-10-27T03:00:00+01:00",
    ]


def test_cron__macros() -> None:
    spec = define("wf", cron="@daily", tz="Europe/Berlin")
    assert ticks(spec, ts(2024, 1, 10, 12), 1) == ["2024-01-11T00:00:00+01:00"]
    assert define("wf", cron="@hourly").next_after(ts(2024, 1, 1, 5, 1)) == ts(2024, 1, 1, 6)


def test_due__on_time_tick_and_next() -> None:
    spec = define("wf", every="1m", catchup="0s")
    fire, nxt = spec.due(ts(2024, 1, 1, 0, 1), ts(2024, 1, 1, 0, 1) + 0.5)
    assert fire == [ts(2024, 1, 1, 0, 1)] and nxt == ts(2024, 1, 1, 0, 2)


def test_due__missed_ticks_inside_the_window_run_once_each_older_are_dropped() -> None:
    spec = define("wf", every="1m", catchup="5m")
    now = ts(2024, 1, 1, 1, 0, 30)
    fire, nxt = spec.due(ts(2024, 1, 1, 0, 1), now)  # down for an hour
    assert fire == [ts(2024, 1, 1, 0, m) for m in range(56, 60)] + [ts(2024, 1, 1, 1, 0)]
    assert nxt == ts(2024, 1, 1, 1, 1)


def test_due__catchup_zero_still_tolerates_scheduler_latency() -> None:
    spec = define("wf", every="1s", catchup=0)
    now = 1000.0
    fire, _ = spec.due(now - 60, now)
    assert fire[0] == now - MIN_CATCHUP and fire[-1] == now


def test_due__nothing_due_before_the_next_tick() -> None:
    spec = define("wf", cron="0 * * * *")
    assert spec.due(ts(2024, 1, 1, 1), ts(2024, 1, 1, 0, 59)) == ([], ts(2024, 1, 1, 1))


def test_due__a_long_backlog_comes_in_bounded_batches() -> None:
    spec = define("wf", every="1s", catchup="1h")
    now = 10_000.0
    fire, nxt = spec.due(now - 500, now, limit=100)
    assert len(fire) == 100 and fire[0] == now - 500 and nxt == now - 400


def test_run_id__derived_from_schedule_and_tick() -> None:
    spec = define("reports.nightly", cron="0 2 * * *", id="nightly")
    assert spec.run_id(ts(2024, 3, 30, 2)) == "sched:nightly:2024-03-30T02:00:00Z"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression '61 \\* \\* \\* \\*' for schedule 'wf'"),
        ({"cron": "0 9 * *"}, "need 5 fields"),
        ({"cron": "0 0 9 * * *"}, "need 5 fields"),
        ({"cron": ""}, "invalid cron expression ''"),
        ({"cron": "0 0 30 2 *"}, "never fires"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron": "0 9 * * *", "every": "1h"}, "exactly one of cron= or every="),
        ({}, "exactly one of cron= or every="),
        ({"every": "1h", "overlap": "queue"}, "invalid overlap 'queue'.*skip, buffer_one"),
        ({"every": "500ms"}, "at least 1s"),
        ({"every": "soon"}, "every of schedule 'wf'"),
        ({"every": "1h", "catchup": "-1h"}, "catchup of schedule 'wf'"),
    ],
)
def test_define__bad_options_are_one_line_value_errors(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        define("wf", **options)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_schedule__registers_under_the_workflow_name_and_rejects_a_clashing_id() -> None:
    reg = cairn.Registry()
    spec = make_schedule("reports.daily", cron="0 6 * * *", reg=reg)
    assert reg.schedules == {"reports.daily": spec}
    make_schedule("reports.daily", cron="0 6 * * *", reg=reg)  # the same again: fine
    with pytest.raises(ValueError, match=r"schedule id 'reports\.daily' is already declared"):
        make_schedule("reports.daily", cron="0 7 * * *", reg=reg)
    make_schedule("reports.daily", cron="0 7 * * *", reg=reg, id="reports.daily.late")
    assert set(reg.schedules) == {"reports.daily", "reports.daily.late"}


def test_due__a_short_window_is_honoured_as_written() -> None:
    spec = define("wf", every="1s", catchup="2s")
    now = 1000.0
    fire, nxt = spec.due(now - 30, now)
    assert fire == [now - 2, now - 1, now] and nxt == now + 1
