"""Durations: ``"1h30m"``, seconds or a ``timedelta``, parsed into a ``timedelta``.

This module only parses; what a duration is used for (sleeps, timeouts, retries) lives elsewhere.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import timedelta

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
_HINT = '(use e.g. "30s", "1h30m", "2d")'


def parse(value: str | int | float | timedelta, *, what: str = "duration") -> timedelta:
    """Parse a duration given as a string, a number of seconds, or a ``timedelta``.

    Strings combine a number and a unit, optionally repeated: ``"250ms"``, ``"30s"``,
    ``"5m"``, ``"1h30m"``, ``"2d12h"``, ``"1w"``, ``"1.5s"``. Units are ``w d h m s ms us``;
    whitespace is tolerated and a bare number (``"30"``) means seconds. Zero is allowed,
    negative durations are not.

    Args:
        value: The duration.
        what: What the duration is for, named in the error message (``"retry delay"``).

    Returns:
        The duration as a non-negative ``timedelta``.

    Raises:
        ValueError: If ``value`` is not a valid non-negative duration; the one-line message
            names ``what`` and the bad input.
    """
    if isinstance(value, str):
        parsed = _parse_text(value)
        if parsed is None:
            raise ValueError(f"{_prefix(what)}: {_show(value)} {_HINT}")
        return parsed
    if isinstance(value, timedelta):
        if value < _ZERO:
            raise ValueError(f"{_prefix(what)}: {_show(value)} (must not be negative)")
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{_prefix(what)}: {_show(value)} (must be a finite number >= 0)")
        try:
            return timedelta(seconds=number)
        except OverflowError:
            raise ValueError(f"{_prefix(what)}: {_show(value)} (too large)") from None
    raise ValueError(
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
        ValueError: If ``value`` is not a valid non-negative duration.
    """
    return parse(value, what=what).total_seconds()


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
            return None
        total = timedelta(0)
        for number, unit in _PART.findall(text):
            total += _UNITS[unit] * float(number)
        return total
    except OverflowError:
        return None
