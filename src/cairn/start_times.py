"""When a run may start: `run_at` (a datetime, a date or ISO 8601 text) or `delay`.

Read alike by `engine.start` and `cairn.schedule_workflow`; this module only computes the
time, the PENDING run that waits for it is stored elsewhere.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from cairn import durations
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["moment", "start_at"]

_EXAMPLES = '(e.g. "2026-01-01", "2026-01-01T09:30:00" or "2026-01-01T09:30:00+01:00")'


def moment(value: Any, *, what: str = "run_at") -> float:
    """A point in time as seconds since the epoch.

    Args:
        value: An aware datetime; a naive datetime (taken as UTC); a date (midnight UTC);
            or ISO 8601 text of either ("2026-01-01", "2026-01-01T09:30:00Z",
            "2026-01-01 09:30+01:00"), naive text again taken as UTC.
        what: What the time is for, named in the error message.

    Raises:
        InvalidValue (a ValueError): Text that is not an ISO 8601 date or date-time, naming `what`.
        InvalidArguments (a TypeError): Any other type, naming `what`.
    """
    if isinstance(value, str):
        value = _parse(value, what)
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.timestamp()
    if isinstance(value, date):
        return datetime.combine(value, time(), UTC).timestamp()
    raise InvalidArguments(
        f"{what} must be a datetime, a date or ISO 8601 text {_EXAMPLES}, got {value!r} "
        "(delay= takes a duration)"
    )


def start_at(now: float, delay: Any, run_at: Any, *, caller: str = "engine.start") -> float | None:
    """When a run may start: None for now, else `run_at` or `now + delay`.

    `delay` is a duration ("365d", seconds, a timedelta) or a datetime to start at;
    `run_at` anything `moment` reads. `caller` names the function in the error given
    both.

    Raises:
        InvalidValue (a ValueError): Both given, a bad duration or a bad `run_at` text.
        InvalidArguments (a TypeError): A `run_at` of another type.
    """
    if run_at is not None:
        if delay is not None:
            raise InvalidValue(f"{caller} got both delay= and run_at=; give one")
        return moment(run_at, what="run_at")
    if delay is None:
        return None
    if isinstance(delay, datetime):
        return moment(delay, what="delay")
    return now + durations.parse(delay, what="start delay").total_seconds()


def _parse(text: str, what: str) -> datetime:
    """ISO 8601 text as a datetime (a date alone as its midnight); ValueError naming `what`."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidValue(
            f"{what} is not an ISO 8601 date or date-time: {text[:60]!r} {_EXAMPLES}"
        ) from None
