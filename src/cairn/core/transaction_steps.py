"""One attempt of a `@cairn.transaction` step: its function and its checkpoint, one commit.

`call` opens the store's step transaction and runs the function with its connection;
core/attempts.py then serializes the result as for any step and hands the entry to
`commit`, which writes it fenced by the run's lease in the same transaction. A failure
anywhere before COMMIT rolls the user's writes back with it; nothing is left half done.

A step that blocks in the database (waiting for a row lock, a long statement) is stopped
by the database: the step's timeout is each statement's limit there (PostgreSQL), and an
expired timeout or a cancel of the run interrupts the running statement, so that a plain
function's thread returns and the transaction can be rolled back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.authoring import context
from cairn.core import durable
from cairn.core.signals import Unwind
from cairn.errors import (
    FatalError,
    RetryableError,
    StoreError,
    StoreRefused,
    TransientWorkflow,
)
from cairn.observability import logcontext
from cairn.store.protocol import LeaseLost, StepTransaction
from cairn.store.records import StepRecord

if TYPE_CHECKING:
    from cairn.authoring.transaction import TransactionDef
    from cairn.core.live_view import LiveView

log = logcontext.logger("cairn.executor")

NOT_TRANSIENT = (
    "it cannot run transaction steps: its database is a private one in memory, not the "
    "one that holds the application's tables"
)


def check_durable(live: LiveView, step: TransactionDef[Any, Any]) -> None:
    """Refuse a transaction step in a transient run (TransientWorkflow, at the call)."""
    if live.env.ephemeral:
        raise TransientWorkflow(live.run.workflow, f"{NOT_TRANSIENT} (step {step.name!r})")


@dataclass(slots=True)
class Held:
    """What the step's function returned, with its transaction still open."""

    value: Any
    transaction: StepTransaction


async def call(
    live: LiveView, step: TransactionDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Held:
    """Open the transaction and run the step's function in it; rolled back if it raises.

    Patch markers decided earlier are stored first: while the transaction is open, the
    store's other writes wait for it (SQLite), so none may be awaited inside.
    """
    if live.marks:
        await live.store_marks()
    store = live.env.store
    sync = not step.is_async
    txn = await durable.write(
        live,
        lambda: store.begin_step_transaction(sync=sync, timeout=step.timeout),
        what=f"the transaction of step {step.name!r}",
    )
    try:
        with context.cancel_stops(_stopper(txn, sync=sync)):
            if sync:
                value = await _in_thread(live, step, txn, args, kwargs)
            else:
                value = await step.fn(txn.connection, *args, **kwargs)
        _check_open(step.name, txn)
    except BaseException:
        # Shielded: a cancellation (a timeout) must not leave the transaction open.
        await asyncio.shield(txn.rollback())
        raise
    return Held(value, txn)


def _stopper(txn: StepTransaction, *, sync: bool) -> Callable[[], None]:
    """What a cancel of the run does to the step: interrupt its statement, or its task."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def stop() -> None:
        if sync:
            loop.run_in_executor(None, txn.interrupt)
        elif task is not None:
            task.cancel()  # psycopg cancels the statement on the server when cancelled

    return stop


async def _in_thread(
    live: LiveView,
    step: TransactionDef[Any, Any],
    txn: StepTransaction,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    ctx = contextvars.copy_context()  # current_run() works in the thread
    conn = txn.connection
    running = live.env.threads.submit(lambda: ctx.run(step.fn, conn, *args, **kwargs))
    live.attempt.track_thread(running)
    try:
        return await asyncio.wrap_future(running)
    except asyncio.CancelledError:
        # Timed out or cancelled: stop the statement the thread may be blocked in, then
        # roll back only once it returns (it is still using the connection).
        if not running.done():
            await asyncio.shield(asyncio.to_thread(txn.interrupt))
        await asyncio.shield(asyncio.to_thread(concurrent.futures.wait, [running]))
        raise


def _check_open(name: str, txn: StepTransaction) -> None:
    state = txn.state()
    if state == "ended":
        raise FatalError(
            f"transaction step {name!r} ended its transaction itself (a commit or rollback "
            "on its connection); cairn commits it with the step's checkpoint, so the step "
            "cannot be retried safely: its writes may already be committed"
        )
    if state == "aborted":
        raise RetryableError(
            f"transaction step {name!r}: a statement failed inside its transaction (the "
            "error was caught in the step) and the database aborted it; its writes are "
            "rolled back"
        )


async def commit(live: LiveView, held: Held, record: StepRecord) -> None:
    """Write `record` in the step's transaction, fenced by the lease, and commit.

    A run no longer held (LeaseLost) or a database failure rolls everything back and
    unwinds the attempt; the next attempt replays from what is stored, which says whether
    the step committed. StoreRefused (a result too big for the database) is raised.
    """
    txn = held.transaction
    if live.closed:  # a stray branch of an attempt already over must not write
        await txn.rollback()
        raise live.leave(Unwind())
    env = live.env
    if env.before_commit is not None:
        env.before_commit(record)
    marks, live.marks = live.marks, []
    live.journaled = True
    try:
        await txn.commit(live.lease, record, marks)
    except LeaseLost:
        raise live.leave(Unwind()) from None
    except StoreRefused:
        live.marks = marks + live.marks
        raise
    except StoreError as exc:
        log.warning(
            "run %s: the transaction of step %r did not commit surely (%s); replaying the run",
            live.run.run_id,
            record.key,
            exc,
        )
        raise live.leave(Unwind()) from exc
    if env.commit_hook is not None:
        env.commit_hook(record)
