"""Durations: ``"1h30m"``, ``"3 hours"``, seconds or a ``timedelta``, parsed into a ``timedelta``.

This module only parses; what a duration is used for (sleeps, timeouts, retries) lives elsewhere.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import timedelta

from cairn.usage_errors import InvalidValue

__all__ = ["parse", "seconds"]

_UNITS = {
    "w": timedelta(weeks=1),
    "d": timedelta(days=1),
    "h": timedelta(hours=1),
    "m": timedelta(minutes=1),
    "s": timedelta(seconds=1),
    "ms": timedelta(milliseconds=1),
    "us": timedelta(microseconds=1),
    "µs": timedelta(microseconds=1),
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
# "ms" and "us" come before "m" and "s" so the alternation matches the longest unit.
_PART = re.compile(rf"\s*({_NUMBER})\s*(ms|us|µs|w|d|h|m|s)")
_WHOLE = re.compile(rf"(?:\s*{_NUMBER}\s*(?:ms|us|µs|w|d|h|m|s))+\s*")
_BARE = re.compile(rf"\s*({_NUMBER})\s*")
_ZERO = timedelta(0)
_HINT = '(use e.g. "30s", "1h30m", "2d" or "3 hours")'
# Durations in words, as Cloudflare Workflows and others write them: "3 hours",
# "1 hour 30 minutes", "2 weeks", "1 hour, 30 minutes and 10 seconds". Case does not matter.
_WORDS = {
    **{word: timedelta(weeks=1) for word in ("week", "weeks", "wk", "wks")},
    **{word: timedelta(days=1) for word in ("day", "days")},
    **{word: timedelta(hours=1) for word in ("hour", "hours", "hr", "hrs")},
    **{word: timedelta(minutes=1) for word in ("minute", "minutes", "min", "mins")},
    **{word: timedelta(seconds=1) for word in ("second", "seconds", "sec", "secs")},
    **{word: timedelta(milliseconds=1) for word in ("millisecond", "milliseconds", "msec")},
    **{word: timedelta(microseconds=1) for word in ("microsecond", "microseconds")},
}
_LONG_WORDS = dict(_WORDS)
_WORDS.update(_UNITS)
# Units whose length varies: refused with a hint rather than guessed.
_VAGUE = frozenset({"month", "months", "mo", "year", "years", "yr", "yrs", "y"})
_WORD_PART = re.compile(rf"\s*({_NUMBER})\s*([^\W\d_]+)")
_WORD_SEPARATOR = re.compile(r"\s*(?:,\s*)?(?:and\b)?", re.IGNORECASE)


def parse(value: str | int | float | timedelta, *, what: str = "duration") -> timedelta:
    """Parse a duration given as a string, a number of seconds, or a ``timedelta``.

    Strings combine a number and a unit, optionally repeated: ``"250ms"``, ``"30s"``,
    ``"5m"``, ``"1h30m"``, ``"2d12h"``, ``"1w"``, ``"1.5s"``. Units are ``w d h m s ms us``;
    whitespace is tolerated and a bare number (``"30"``) means seconds. Units may also be
    words, in any case: ``"3 hours"``, ``"90 minutes"``, ``"1 day"``, ``"10 seconds"``,
    ``"2 weeks"``, ``"1 hour 30 minutes"``, ``"1 hour, 30 minutes and 10 seconds"``
    (``week day hour minute second millisecond microsecond``, singular or plural, and
    ``wk hr min sec``). Months and years are refused: their length varies. Zero is
    allowed, negative durations are not.

    Args:
        value: The duration.
        what: What the duration is for, named in the error message (``"retry delay"``).

    Returns:
        The duration as a non-negative ``timedelta``.

    Raises:
        InvalidValue: If ``value`` is not a valid non-negative duration (a usage error, and
            a ValueError); the one-line message names ``what`` and the bad input.
    """
    if isinstance(value, str):
        parsed = _parse_text(value)
        if parsed is None:
            raise InvalidValue(f"{_prefix(what)}: {_show(value)} {_hint(value)}")
        return parsed
    if isinstance(value, timedelta):
        if value < _ZERO:
            raise InvalidValue(f"{_prefix(what)}: {_show(value)} (must not be negative)")
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise InvalidValue(f"{_prefix(what)}: {_show(value)} (must be a finite number >= 0)")
        try:
            return timedelta(seconds=number)
        except OverflowError:
            raise InvalidValue(f"{_prefix(what)}: {_show(value)} (too large)") from None
    raise InvalidValue(
        f'{_prefix(what)}: {_show(value)} (expected a string like "30s", a number of seconds'
        f" or a timedelta, got {type(value).__qualname__})"
    )


def seconds(value: str | int | float | timedelta, *, what: str = "duration") -> float:
    """Parse a duration like :func:`parse` and return it in seconds.

    Args:
        value: The duration.
        what: What the duration is for, named in the error message.

    Returns:
        The duration in seconds.

    Raises:
        InvalidValue: If ``value`` is not a valid non-negative duration (a ValueError).
    """
    return parse(value, what=what).total_seconds()


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hint(text: str) -> str:
    units = {unit.lower() for _, unit in _WORD_PART.findall(text)}
    if units & _VAGUE:
        return '(months and years vary in length: use days, e.g. "30 days", or sleep_until a date)'
    return _HINT


def _prefix(what: str) -> str:
    return "invalid duration" if what == "duration" else f"invalid duration for {what}"


@functools.lru_cache(maxsize=1024)
def _parse_text(text: str) -> timedelta | None:
    """Parse a duration string; None when it is not one (the caller words the error)."""
    bare = _BARE.fullmatch(text)
    try:
        if bare is not None:
            return timedelta(seconds=float(bare.group(1)))
        if _WHOLE.fullmatch(text) is None:
            return _parse_words(text)
        total = timedelta(0)
        for number, unit in _PART.findall(text):
            total += _UNITS[unit] * float(number)
        return total
    except OverflowError:
        return None


def _parse_words(text: str) -> timedelta | None:
    """``"1 hour 30 minutes"`` and the like; None when it is not one."""
    total = timedelta(0)
    at = 0
    while True:
        part = _WORD_PART.match(text, at)
        if part is None:
            return None
        word = part.group(2)
        # Symbols are exact ("5M" is no duration); words may be in any case ("3 Hours").
        unit = _WORDS.get(word) if word in _UNITS else _LONG_WORDS.get(word.lower())
        if unit is None:
            return None
        total += unit * float(part.group(1))
        if not text[part.end() :].strip():
            return total
        separator = _WORD_SEPARATOR.match(text, part.end())
        at = part.end() if separator is None else separator.end()
