"""When a run may start: `run_at` as a datetime, a date or ISO 8601 text, or `delay`."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from cairn import start_times

MIDNIGHT = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01", MIDNIGHT),  # a date: its midnight UTC
        (" 2026-01-01 ", MIDNIGHT),
        ("2026-01-01T09:30:00", MIDNIGHT + 34200),  # naive: UTC
        ("2026-01-01 09:30", MIDNIGHT + 34200),
        ("2026-01-01T09:30:00Z", MIDNIGHT + 34200),
        ("2026-01-01T09:30:00+01:00", MIDNIGHT + 30600),
        (date(2026, 1, 1), MIDNIGHT),
        (datetime(2026, 1, 1, 9, 30), MIDNIGHT + 34200),
        (datetime(2026, 1, 1, 9, 30, tzinfo=timezone(timedelta(hours=-5))), MIDNIGHT + 52200),
    ],
)
def test_moment__reads_dates_datetimes_and_iso_text(value: object, expected: float) -> None:
    assert start_times.moment(value) == expected


@pytest.mark.parametrize("text", ["next year", "2026-13-01", "2026-02-30", "", "1h"])
def test_moment__bad_text_is_one_line_naming_run_at(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        start_times.moment(text)
    message = str(caught.value)
    assert message.startswith(f"run_at is not an ISO 8601 date or date-time: {text!r}")
    assert "\n" not in message


def test_moment__other_types_are_refused_naming_run_at() -> None:
    with pytest.raises(TypeError, match=r"^run_at must be a datetime, a date or ISO 8601 text"):
        start_times.moment(1767225600)


def test_start_at__delay_run_at_or_now() -> None:
    assert start_times.start_at(100.0, None, None) is None
    assert start_times.start_at(100.0, "1h", None) == 3700.0
    assert start_times.start_at(100.0, timedelta(days=365), None) == 100.0 + 365 * 86400
    assert start_times.start_at(100.0, None, "2026-01-01") == MIDNIGHT
    assert start_times.start_at(100.0, datetime(2026, 1, 1), None) == MIDNIGHT
    with pytest.raises(ValueError, match=r"^cairn.schedule_workflow got both delay= and run_at="):
        start_times.start_at(0.0, "1d", "2026-01-01", caller="cairn.schedule_workflow")
    with pytest.raises(ValueError, match="invalid duration for start delay: '1 year'"):
        start_times.start_at(0.0, "1 year", None)
