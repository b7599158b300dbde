"""An attempt's reads of offloaded values that the blob store does not give back for now.

A blob store away (no connection, a 5xx, throttled) is no fault of the run: failing it
would lose the run to an outage, and letting the error reach workflow code would let it
take another branch. So the read is waited out (`fetched`), as core/durable.py waits out
a write, the run's `waiting_for` naming the store, until the store answers or the
attempt ends (its worker stops: the run is handed back).

A cancel asked meanwhile is delivered at once where the run stands: at the durable point
whose value is being read (`at`), once the replay has caught up with the history (the
value is the last recorded, or new: a message just taken, a step's result read back),
as `Cancelled` raised there instead of the value. A replay raises it there again before
reading the value. Before the history is caught up it cannot be: the run stands further
on, and its cleanup (`except Cancelled`, `finally`) must run from there, so the cancel
waits for the read, and the run's `waiting_for` says so. A run whose code has not begun
(its first attempt reading its arguments) ends CANCELLED without running any.

A pause asked meanwhile parks the run PAUSED at once, wherever its replay stands: a pause
runs no cleanup, the value is stored already, and the resumed run replays and reads it
again. Not inside `cairn.shield()`, and not while a cancel is pending (it goes first).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from cairn.blobs import BlobStoreUnavailable, reference
from cairn.core import durable
from cairn.core.signals import Suspend, Unwind
from cairn.errors import Cancelled
from cairn.models import RunStatus
from cairn.observability import logcontext

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView
    from cairn.core.run_env import RunEnv

T = TypeVar("T")
log = logcontext.logger("cairn.executor")

ARGUMENTS = "~arguments#1"
"""The durable point of a run's arguments, read before its code begins."""

CANCEL_WAITS = (
    "; a cancel was asked: it is delivered once the value is read and the replay reaches "
    "where the run stands (its cleanup runs from there)"
)
"""What the run's `waiting_for` adds while a cancel waits for the read."""


async def fetched(
    live: LiveView,
    env: RunEnv,
    read: Callable[[], Awaitable[T]],
    first: BlobStoreUnavailable,
    at: str | None,
) -> T:
    """`read()` for `live`'s attempt, tried again until the blob store answers it.

    `at`: the durable point whose value it is (None: a cancel is not delivered there).
    Raises Cancelled if a cancel is delivered at `at` meanwhile, Suspend if a pause parks
    the run (see the module docstring).
    """
    delay = durable.FIRST_DELAY
    run_id, lease = live.run.run_id, live.lease
    log.warning("run %s: %s; retrying until the blob store answers", run_id, first)
    said = reference.reading_note(first)
    noted = await durable.note(env, run_id, lease, said)
    woken = asyncio.Event()  # set by a cancel or a pause: the wait ends at once
    undo = live.interrupts.on_request(woken.set)
    told = False  # the run says a cancel waits for the read
    try:
        while True:
            await _met(live, at)
            if live.interrupts.cancel and not told:
                told = await durable.note(env, run_id, lease, said + CANCEL_WAITS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), delay)
            woken.clear()
            delay = min(delay * 2, durable.LAST_DELAY)
            if live.closed:
                raise live.leave(Unwind())
            await _met(live, at)
            try:
                found = await read()
            except BlobStoreUnavailable:
                continue
            if noted:
                await durable.note(env, run_id, lease, None)
            return found
    finally:
        undo()


async def _met(live: LiveView, at: str | None) -> None:
    """Meet a pending cancel at `at` if it may be delivered there, or a pending pause."""
    interrupts = live.interrupts
    if interrupts.cancel:
        if _deliverable(live, at):
            await _deliver(live, at)
    elif interrupts.pausable():
        raise live.leave(Suspend(RunStatus.PAUSED.value, None))


def _deliverable(live: LiveView, at: str | None) -> bool:
    """Whether the pending cancel may be delivered at durable point `at` now."""
    interrupts = live.interrupts
    if at is None or interrupts.delivered_at is not None or interrupts.shielded():
        return False
    if interrupts.recorded_at is not None:  # a replay: only where it was delivered
        return interrupts.recorded_at == at
    return live.journal.caught_up()


async def _deliver(live: LiveView, at: str | None) -> None:
    """Raise Cancelled into the workflow at `at`, recorded before anything else is."""
    try:
        live.interrupts.deliver(str(at))
    except Cancelled:
        await durable.note(live.env, live.run.run_id, live.lease, None)
        await live.record_cancel()
        raise
