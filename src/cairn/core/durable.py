"""Writes made on behalf of an attempt, and what happens when the database fails them.

- Not held any more (LeaseLost): the run was taken over or claimed again; the attempt
  unwinds without writing anything else.
- Unavailable (StoreUnavailable): the database is away or busy and the write was not
  applied; it is sent again, for as long as the attempt lives. Giving up would make the
  run replay, and a step whose result was not recorded would run again: waiting out an
  outage is what keeps a completed step from running twice.
- Unknown (StoreUnavailable with `unknown`): the reply to a write that may have committed
  was lost. A step outcome is looked up in the journal (its row is there or not); any
  other write unwinds the attempt, and the next one replays from what is stored.
- Refused (StoreRefused): the database will never take it; the caller fails the step or
  the run, once.

A large value's blob is written before the write that names it (`stored`): a blob store
that does not take it (full, unwritable, away) is waited out the same way, for as long
as the attempt lives, so that a step whose result is in hand is not run again. A blob
store that does not give back a value the attempt reads is waited out too
(core/blob_reads.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cairn import blobs
from cairn.blobs import BlobUnwritable
from cairn.core.signals import Unwind
from cairn.errors import StoreError, StoreRefused, StoreUnavailable
from cairn.observability import logcontext
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, RunRecord, StepRecord

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView
    from cairn.core.run_env import RunEnv

T = TypeVar("T")
log = logcontext.logger("cairn.executor")


class Attempt(Protocol):
    """What a write needs to know of the attempt it is made for."""

    @property
    def run(self) -> RunRecord:
        """The run as claimed."""
        ...

    @property
    def lease(self) -> Lease:
        """The attempt's right to write."""
        ...

    @property
    def closed(self) -> bool:
        """True once nothing of the attempt may write any more."""
        ...

    @property
    def marks(self) -> list[StepRecord]:
        """Patch markers decided but not stored yet (they go before any later write)."""
        ...

    async def store_marks(self) -> None:
        """Store `marks`."""
        ...

    def leave(self, signal: BaseException) -> BaseException:
        """Note that the attempt unwinds with `signal` (see Journal.leaving); returns it."""
        ...


@dataclass(frozen=True, slots=True)
class Bare:
    """An attempt that never got as far as a LiveRun (its workflow is unknown here)."""

    run: RunRecord
    lease: Lease
    closed: bool = False
    marks: list[StepRecord] = field(default_factory=list)

    async def store_marks(self) -> None:
        """A bare attempt decides no patches."""

    def leave(self, signal: BaseException) -> BaseException:
        """Nothing unwinds here: returns `signal`."""
        return signal


FIRST_DELAY = 0.05
"""Seconds before a failed write (or blob) is sent again; doubled each time."""
LAST_DELAY = 2.0
"""The longest wait between two tries."""


async def write(live: Attempt, send: Callable[[], Awaitable[T]], *, what: str) -> T:
    """Make one write for `live`'s attempt (see the module docstring); `what` names it."""
    delay = FIRST_DELAY
    warned = False
    while True:
        if live.closed:  # a stray branch of an attempt already over must not write
            raise live.leave(Unwind())
        if live.marks:  # a patch decided earlier is stored before anything after it
            await live.store_marks()
        try:
            return await send()
        except LeaseLost:
            raise live.leave(Unwind()) from None
        except StoreRefused:
            raise
        except StoreUnavailable as exc:
            if exc.unknown:
                log.warning(
                    "run %s: the outcome of %s is unknown (%s); replaying the run",
                    live.run.run_id,
                    what,
                    exc,
                )
                raise live.leave(Unwind()) from exc
            if not warned:
                log.warning(
                    "run %s: cannot write %s yet (%s); retrying until the database answers",
                    live.run.run_id,
                    what,
                    exc,
                )
                warned = True
        except StoreError as exc:
            # Neither refused nor merely unavailable (a broken schema, a bug): end the
            # attempt, which user code cannot catch; its worker hands the run back.
            log.warning("run %s: cannot write %s: %s", live.run.run_id, what, exc)
            raise live.leave(Unwind()) from exc
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_DELAY)


async def record_step(live: LiveView, record: StepRecord, first: BaseException) -> None:
    """Commit a step outcome whose first send failed with `first`.

    The slow path of `LiveSteps.commit_step`. After a lost reply the journal says whether
    the first send landed; otherwise the outcome is sent again (see `write`).
    """
    if isinstance(first, LeaseLost):
        raise live.leave(Unwind()) from None
    if isinstance(first, StoreRefused):
        raise first
    unknown = isinstance(first, StoreUnavailable) and first.unknown
    if not unknown and not isinstance(first, StoreUnavailable):
        log.warning("run %s: cannot write %r: %s", live.run.run_id, record.key, first)
        raise live.leave(Unwind()) from first
    store, lease = live.env.store, live.lease
    while True:
        if unknown:
            # Did it land before the reply was lost? The row says, once the database answers.
            stored = await write(
                live,
                lambda: store.read(journal_ops.load_journal(record.run_id)),
                what=f"the journal of {record.key!r}",
            )
            mine = next((row for row in stored if row.key == record.key), None)
            if mine is not None:
                if (mine.seq, mine.status, mine.result, mine.error) != (
                    record.seq,
                    record.status,
                    record.result,
                    record.error,
                ):
                    raise live.leave(Unwind())  # another attempt recorded it: this one is stale
                return
        try:
            await write(
                live,
                lambda: store.write(journal_ops.record_step(lease, record)),
                what=f"{record.key!r}",
            )
            return
        except Unwind as unwind:
            cause = unwind.__cause__
            if not (isinstance(cause, StoreUnavailable) and cause.unknown):
                raise
            unknown = True


async def value_text(
    live: Attempt, env: RunEnv, value: Any, what: str, asked: Callable[[], bool]
) -> str:
    """`value`'s stored text, a large one's blob written in a thread and waited out (`stored`).

    `asked`: whether a cancel or a hand back is pending (then the wait unwinds instead).
    """
    try:
        return await blobs.dumps_async(env.serializer, value, what=what)
    except BlobUnwritable:  # a coroutine more only then
        return await stored(live, env, value, what, asked)


async def stored(
    live: Attempt,
    env: RunEnv,
    value: Any,
    what: str,
    given_up: Callable[[], bool] = lambda: False,
) -> str:
    """`value`'s stored text for `live`'s attempt; a blob store that refuses it is waited out.

    A blob store that is full, unwritable or away is not the value's fault: failing the
    step (or the run) for it would run the step again once the store is fixed, or leave
    the run failed. The blob is written again, with the same back-off as a database
    write, until the store takes it or the attempt ends (its worker stops, or it lost
    the run). Meanwhile the run's `waiting_for` names the store's refusal (`cairn runs
    show`, the dashboard), and is cleared once the store takes the blob. Once
    `given_up()` (a cancel or a hand back was asked for), the attempt unwinds instead:
    the run replays, and meets the request at the step, which it does not run again.
    `given_up` may raise instead (Cancelled, into a step's code: core/streams.py).
    """
    delay = FIRST_DELAY
    noted = False
    run_id = live.run.run_id
    while True:
        if live.closed:
            raise live.leave(Unwind())
        try:
            text = await blobs.dumps_async(env.serializer, value, what=what)
        except BlobUnwritable as exc:
            try:
                if given_up():
                    raise live.leave(Unwind()) from exc
            except BaseException:  # the Unwind, or what `given_up` raised: no wait any more
                if noted:
                    await note(env, run_id, live.lease, None)
                raise
            if not noted:
                log.warning(
                    "run %s: %s; retrying until the blob store takes it",
                    run_id,
                    str(exc).replace("\n", " "),
                )
                noted = await note(env, run_id, live.lease, exc.waiting_for())
        else:
            if noted:
                await note(env, run_id, live.lease, None)
            return text
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_DELAY)


async def note(env: RunEnv, run_id: str, lease: Lease, text: str | None) -> bool:
    """Set (or clear) what the run waits for; a database that does not answer is let be.

    Only words for people: the wait goes on (and the write's outcome follows) either way.
    """
    try:
        await env.store.write(run_ops.note_held(run_id, lease, text))
    except StoreError as exc:
        log.info("run %s: cannot say it waits for the blob store: %s", run_id, exc)
    return True
