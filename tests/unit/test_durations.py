from __future__ import annotations

import enum
from datetime import timedelta

import pytest

from cairn import durations


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("250ms", timedelta(milliseconds=250)),
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("1h", timedelta(hours=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d12h", timedelta(days=2, hours=12)),
        ("1w", timedelta(weeks=1)),
        ("1.5s", timedelta(seconds=1.5)),
        (".5s", timedelta(seconds=0.5)),
        ("1.5h", timedelta(minutes=90)),
        ("10us", timedelta(microseconds=10)),
        ("10µs", timedelta(microseconds=10)),
        (
            "1w2d3h4m5s6ms",
            timedelta(weeks=1, days=2, hours=3, minutes=4, seconds=5, milliseconds=6),
        ),
        ("0s", timedelta(0)),
        ("30", timedelta(seconds=30)),
        ("2.5", timedelta(seconds=2.5)),
    ],
)
def test_parse__string(text: str, expected: timedelta) -> None:
    assert durations.parse(text) == expected


@pytest.mark.parametrize("text", [" 30s", "30s ", " 1h 30m ", "1h30m\n", "\t5 m", "1 h 30 m"])
def test_parse__whitespace_tolerated(text: str) -> None:
    assert durations.parse(text) in (
        timedelta(seconds=30),
        timedelta(minutes=90),
        timedelta(minutes=5),
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, timedelta(0)),
        (5, timedelta(seconds=5)),
        (2.5, timedelta(seconds=2.5)),
        (0.001, timedelta(milliseconds=1)),
        (timedelta(hours=2), timedelta(hours=2)),
        (timedelta(0), timedelta(0)),
    ],
)
def test_parse__number_or_timedelta(value: float | timedelta, expected: timedelta) -> None:
    assert durations.parse(value) == expected


def test_parse__int_subclass_is_a_number() -> None:
    class Seconds(enum.IntEnum):
        TEN = 10

    assert durations.parse(Seconds.TEN) == timedelta(seconds=10)


@pytest.mark.parametrize(
    "value",
    [
        "5x",
        "",
        "   ",
        "-5s",
        "s",
        "1h-30m",
        "5 x",
        "1e3s",
        "five",
        "1..5s",
        "5S",
        "5M",
        "1h30",
        "ms",
    ],
)
def test_parse__bad_string(value: str) -> None:
    with pytest.raises(ValueError, match="invalid duration: ") as info:
        durations.parse(value)
    assert repr(value) in str(info.value)
    assert '"1h30m"' in str(info.value)


@pytest.mark.parametrize(
    "value",
    [
        -1,
        -0.5,
        float("nan"),
        float("inf"),
        timedelta(seconds=-1),
        True,
        False,
        None,
        [1],
        b"5s",
        1e300,
    ],
)
def test_parse__bad_value(value: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        durations.parse(value)  # type: ignore[arg-type]


def test_parse__huge_string_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="99999999999999w"):
        durations.parse("99999999999999w")


def test_parse__error_names_what_and_input() -> None:
    with pytest.raises(ValueError) as info:
        durations.parse("5x", what="retry delay")
    assert str(info.value) == (
        """invalid duration for retry delay: '5x' (use e.g. "30s", "1h30m", "2d" or "3 hours")"""
    )


def test_parse__error_names_the_type_of_a_wrong_value() -> None:
    with pytest.raises(ValueError, match=r"for timeout: None .*got NoneType"):
        durations.parse(None, what="timeout")  # type: ignore[arg-type]


def test_parse__error_is_one_line_and_short_for_long_input() -> None:
    with pytest.raises(ValueError) as info:
        durations.parse("x" * 1000, what="sleep")
    message = str(info.value)
    assert "\n" not in message
    assert len(message) < 150


def test_parse__negative_message_says_why() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        durations.parse(timedelta(seconds=-1))
    with pytest.raises(ValueError, match=">= 0"):
        durations.parse(-3)


def test_parse__repeated_string_is_cached() -> None:
    durations.parse("17m3s")
    before = durations._parse_text.cache_info().hits
    assert durations.parse("17m3s") == timedelta(minutes=17, seconds=3)
    assert durations._parse_text.cache_info().hits == before + 1


def test_parse__cached_failure_still_names_what() -> None:
    for what in ("sleep", "timeout"):
        with pytest.raises(ValueError, match=f"for {what}: '5x'"):
            durations.parse("5x", what=what)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1h30m", 5400.0), ("250ms", 0.25), (3, 3.0), (timedelta(minutes=1), 60.0)],
)
def test_seconds__converts(value: str | int | timedelta, expected: float) -> None:
    assert durations.seconds(value) == expected


def test_seconds__bad_value_names_what() -> None:
    with pytest.raises(ValueError, match="for lease: '5x'"):
        durations.seconds("5x", what="lease")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 hours", timedelta(hours=3)),
        ("90 minutes", timedelta(minutes=90)),
        ("1 day", timedelta(days=1)),
        ("10 seconds", timedelta(seconds=10)),
        ("2 weeks", timedelta(weeks=2)),
        ("1 hour 30 minutes", timedelta(hours=1, minutes=30)),
        ("1 hour, 30 minutes and 10 seconds", timedelta(hours=1, minutes=30, seconds=10)),
        ("15 Minutes", timedelta(minutes=15)),
        ("1 SECOND", timedelta(seconds=1)),
        ("1.5 hours", timedelta(minutes=90)),
        ("250 milliseconds", timedelta(milliseconds=250)),
        ("5 mins", timedelta(minutes=5)),
        ("2 hrs", timedelta(hours=2)),
        ("30 sec", timedelta(seconds=30)),
        ("1h 30 minutes", timedelta(hours=1, minutes=30)),
        ("0 seconds", timedelta(0)),
    ],
)
def test_parse__words(text: str, expected: timedelta) -> None:
    assert durations.parse(text) == expected


@pytest.mark.parametrize("text", ["1 month", "2 months", "1 year", "3 Years"])
def test_parse__months_and_years_are_refused_with_a_hint(text: str) -> None:
    with pytest.raises(ValueError) as info:
        durations.parse(text, what="sleep duration")
    message = str(info.value)
    assert message.startswith(f"invalid duration for sleep duration: {text!r}")
    assert "vary in length" in message and '"30 days"' in message


@pytest.mark.parametrize(
    "text", ["3 parsecs", "hours", "1 hour 30", "three hours", "1 hour and", "5 MS", "-1 hour"]
)
def test_parse__bad_words(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration") as info:
        durations.parse(text)
    assert repr(text) in str(info.value)
