"""LISTEN cairn_runs and cairn_streams on a connection of its own: notes become wake-ups.

Every commit that makes a run claimable, in any process, sends NOTIFY cairn_runs with the
wake times it set (see `connections.payload`); this store's own commits signal directly.
Every append to a durable stream sends NOTIFY cairn_streams naming it (its readers').
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
from cairn.store.programs import streams
from cairn.store.stream_bells import StreamBells

log = logging.getLogger("cairn.store.postgres")


async def listen(
    conninfo: str,
    where: str,
    signal: WakeSignal,
    health: StoreHealth,
    next_wake: Callable[[], Awaitable[float | None]],
    bells: StreamBells,
) -> None:
    """Listen until cancelled, connecting again (with a growing pause) when it fails."""
    delay = 0.05
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {dialect.CHANNEL}")
                await conn.execute(f"LISTEN {dialect.STREAMS_CHANNEL}")
                signal.set()  # whatever was sent while nobody listened
                await _timers_from_database(where, signal, next_wake)
                delay = 0.05
                async for note in conn.notifies():
                    if note.channel == dialect.STREAMS_CHANNEL:
                        _stream_noticed(bells, note.payload)
                    else:
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


def _stream_noticed(bells: StreamBells, payload: str) -> None:
    named = streams.noticed(payload)
    if named is not None:
        bells.ring(*named)
