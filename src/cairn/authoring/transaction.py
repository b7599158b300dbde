"""`@cairn.transaction`: a step whose writes commit in the transaction of its checkpoint.

Declared here; executed by core/transaction_steps.py, which opens the transaction through
the store (`Store.begin_step_transaction`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar, cast, overload

from cairn.authoring import context, registry
from cairn.authoring.definitions import StepDef
from cairn.authoring.retry import Retry, coerce
from cairn.authoring.step import _timeout_seconds
from cairn.errors import InvalidArguments, InvalidValue
from cairn.names import check_name

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(eq=False)
class TransactionDef(StepDef[P, R]):
    """A registered transaction step: `fn` takes the connection first, then the call's args.

    Calling it inside a run executes it durably, in one transaction with its checkpoint.
    Outside a run there is no such transaction: the call raises NotInRun.
    """

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the step in a transaction of the run's database (NotInRun outside a run)."""
        ctx = context.current(f"transaction step {self.name!r}")
        result: R = ctx.call_step(self, args, kwargs)
        return result


def _check_db(db: object, where: str) -> None:
    if db is None:
        return
    raise InvalidValue(
        f"{where}: db={db!r} is not supported; only db=None (cairn's own database) can be "
        "exactly-once, because the step's checkpoint must commit in the same transaction as "
        "its writes. Keep the tables in cairn's database, or use cairn.steps.db for another "
        "database (at least once)"
    )


def make_transaction(
    fn: Callable[Concatenate[Any, P], R],
    name: str | None,
    retries: Retry | int | None,
    timeout: Any,
    reg: registry.Registry,
) -> TransactionDef[P, R]:
    """Build and register a TransactionDef for `fn`."""
    if not callable(fn):
        raise InvalidArguments(f"@cairn.transaction needs a function, got {fn!r}")
    step_name = check_name(name or fn.__qualname__, "step name")
    defn: TransactionDef[P, R] = TransactionDef(
        name=step_name,
        fn=cast(Callable[P, R], fn),  # called with the connection first (transaction_steps)
        retry=coerce(retries),
        timeout=_timeout_seconds(timeout, f"timeout of step {step_name!r}"),
        is_async=asyncio.iscoroutinefunction(fn),
    )
    functools.update_wrapper(defn, fn)
    reg.add_step(defn)
    return defn


@overload
def transaction(fn: Callable[Concatenate[Any, P], R], /) -> TransactionDef[P, R]: ...


@overload
def transaction(
    name: str | None = None,
    *,
    db: None = None,
    retries: Retry | int | None = None,
    timeout: Any = None,
) -> Callable[[Callable[Concatenate[Any, P], R]], TransactionDef[P, R]]: ...


def transaction(
    name: Any = None,
    *,
    db: None = None,
    retries: Retry | int | None = None,
    timeout: Any = None,
) -> Any:
    """Declare a step whose database writes commit together with its checkpoint.

    The function's first parameter is the connection, inside a transaction of cairn's own
    database: a `sqlite3.Connection` on SQLite; on PostgreSQL a `psycopg.AsyncConnection`
    for an async function, a `psycopg.Connection` for a plain one (run in a thread). Its
    writes and the step's result commit together or not at all, so the step's effect
    happens exactly once, even across crashes. Workflows call it without the connection:
    `await reserve(order_id)` for `def reserve(conn, order_id)`.

    Args:
        name: Stored name of the step (default: the function's qualified name).
        db: None (cairn's own database): the only database whose writes can commit with
            the checkpoint. Anything else raises ValueError.
        retries: A Retry policy, or an int of max attempts (default `Retry()`). A failed
            attempt's writes are rolled back before the next one.
        timeout: Per-attempt time limit as a duration (default: none).

    Returns:
        A TransactionDef that keeps the function's signature without the connection.

    Raises:
        ValueError: `db` is not None, or a bad name, retry policy or timeout.
        TypeError: Not a function.
    """
    if name is not None and not callable(name) and not isinstance(name, str):
        raise InvalidArguments(f"@cairn.transaction name must be a string, got {name!r}")
    where = "@cairn.transaction" if not isinstance(name, str) else f"@cairn.transaction({name!r})"
    _check_db(db, where)

    def decorate(
        fn: Callable[Concatenate[Any, P], R], step_name: str | None = name
    ) -> TransactionDef[P, R]:
        return make_transaction(fn, step_name, retries, timeout, registry.default_registry)

    if callable(name):
        return decorate(name, None)
    return decorate
