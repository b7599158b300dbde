"""In-run functions: each a few lines delegating to the active RunContext."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any

from cairn import durations
from cairn.authoring import context
from cairn.models import RunInfo


def current_run() -> RunInfo:
    """Facts about the run this code is part of (works inside steps too).

    Raises:
        NotInRun: outside a run.
    """
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.current_run()")
    assert ctx is not None
    return ctx.info()


def sleep(duration: Any) -> Awaitable[None]:
    """Sleep durably: the wake time is recorded once, so a restart does not sleep again.

    Args:
        duration: "30s", "1h30m", seconds, or a timedelta.
    """
    seconds = durations.parse(duration, what="sleep duration").total_seconds()
    return context.current("cairn.sleep()").sleep(seconds)


def sleep_until(when: datetime) -> Awaitable[None]:
    """Sleep durably until `when` (a naive datetime is taken as UTC)."""
    if not isinstance(when, datetime):
        raise TypeError(f"cairn.sleep_until needs a datetime, got {when!r}")
    return context.current("cairn.sleep_until()").sleep_until(when)


def check_cancelled() -> None:
    """Raise `cairn.Cancelled` if this run was cancelled (call it in long steps)."""
    ctx = context.in_run()
    if ctx is None:
        context.current("cairn.check_cancelled()")
    assert ctx is not None
    ctx.check_cancelled()
