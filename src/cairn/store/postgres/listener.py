"""LISTEN cairn_runs on a connection of its own: notifications become wake-ups.

Every commit that makes a run claimable, in any process, sends NOTIFY cairn_runs with the
wake times it set (see `connections.payload`); this store's own commits signal directly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import psycopg

from cairn.store._health import StoreHealth
from cairn.store._wakeups import WakeSignal
from cairn.store.postgres import dialect
from cairn.store.postgres.group_commit import NOW

log = logging.getLogger("cairn.store.postgres")


async def listen(
    conninfo: str,
    where: str,
    signal: WakeSignal,
    health: StoreHealth,
    next_wake: Callable[[], Awaitable[float | None]],
) -> None:
    """Listen until cancelled, connecting again (with a growing pause) when it fails."""
    delay = 0.05
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {dialect.CHANNEL}")
                signal.set()  # whatever was sent while nobody listened
                await _timers_from_database(where, signal, next_wake)
                delay = 0.05
                async for note in conn.notifies():
                    _notified(signal, note.payload)
        except psycopg.Error as exc:
            health.trouble()
            log.debug("cairn: LISTEN on %s failed (%s); retrying", where, exc)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def _timers_from_database(
    where: str, signal: WakeSignal, next_wake: Callable[[], Awaitable[float | None]]
) -> None:
    """Hint the next wake time stored: timers set while nobody listened, or before."""
    try:
        due = await next_wake()
    except Exception as exc:  # the claim loop's polling still finds due runs
        log.debug("cairn: reading the next wake time on %s failed (%s)", where, exc)
        return
    if due is not None:
        signal.at(due)


def _notified(signal: WakeSignal, payload: str) -> None:
    try:
        wakes = [float(token) for token in payload.split()] or [NOW]
    except ValueError:
        wakes = [NOW]
    signal.wake_times(wakes)
