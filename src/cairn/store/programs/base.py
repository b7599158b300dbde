"""The small base every program stands on: `Sql`, `Program`, `@single_write` and helpers.

A program is a generator that yields `Sql` statements and receives each one's result (a
row count, one row, or all rows); its return value is the transaction's result. Backends
only run programs (`SqliteStore` synchronously, `PostgresStore` with await), so the logic
of claiming, fencing, waking and control lives in programs and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any, Literal, TypeVar

from cairn.models import RunStatus

T = TypeVar("T")


# Not frozen, like StepRecord: frozen fields cost an object.__setattr__ each per statement.
@dataclass(slots=True)
class Sql:
    """One statement of a program.

    `fetch` says what the program gets back: the row count, the first row (or None), or
    all rows. `lock` marks a SELECT whose rows the transaction claims: PostgreSQL adds
    `FOR UPDATE SKIP LOCKED` ("skip") or `FOR UPDATE` ("update", waiting for the lock),
    or `FOR SHARE` ("share": the rows may not change until the transaction ends, and a
    change under way is waited for and then read); SQLite needs nothing (its write
    transaction is exclusive).
    """

    text: str
    params: Sequence[Any] = ()
    fetch: Literal["count", "one", "all"] = "count"
    lock: Literal["", "skip", "update", "share"] = ""


Program = Generator[Sql, Any, T]
F = TypeVar("F", bound=Callable[..., Program[Any]])

FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)
# Finished for good: a run leaves a finished status only through control.retry_run, and
# only from FAILED.
FINAL = FINISHED - {RunStatus.FAILED}

_SINGLE_WRITE: set[CodeType] = set()
_WAKES: set[CodeType] = set()


def single_write(fn: F) -> F:
    """Declare that `fn`'s programs change rows only with their last statement.

    Such a program raises nothing once it has changed a row, so when it fails it has
    changed nothing (SQLite undoes a failing statement by itself), and a backend need not
    guard it with a savepoint. SqliteStore checks the promise: a program that breaks it
    rolls its whole batch back rather than leave part of its work behind.
    """
    _SINGLE_WRITE.add(fn.__code__)
    return fn


def is_single_write(program: Program[Any]) -> bool:
    """True if `program` comes from a function declared `@single_write`."""
    return getattr(program, "gi_code", None) in _SINGLE_WRITE


def wakes(fn: F) -> F:
    """Declare that after `fn`'s programs commit, a run may be claimable at once.

    The store then wakes its workers' claim loops (on PostgreSQL, other processes' too,
    through NOTIFY) instead of leaving them to their next poll.
    """
    _WAKES.add(fn.__code__)
    return fn


def is_waking(program: Program[Any]) -> bool:
    """True if `program` comes from a function declared `@wakes`."""
    return getattr(program, "gi_code", None) in _WAKES


def one_row(text: str, params: Sequence[Any] = ()) -> Sql:
    """A statement whose first row (or None) the program gets back."""
    return Sql(text, params, "one")


def all_rows(text: str, params: Sequence[Any] = (), *, lock: bool = False) -> Sql:
    """A statement whose rows the program gets back; `lock`: rows it claims (SKIP LOCKED)."""
    return Sql(text, params, "all", "skip" if lock else "")
