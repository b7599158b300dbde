"""The small base every program stands on: `Sql`, `Program`, `@operation` and its flags.

A program is a generator that yields `Sql` statements and receives each one's result (a
row count, one row, or all rows); its return value is the transaction's result. Backends
only run programs (`SqliteStore` synchronously, `PostgresStore` with await), so the logic
of claiming, fencing, waking and control lives in programs and nowhere else.

A store operation is one program declared `@operation`: calling it makes an `Operation`
(the program's arguments, nothing run yet) that a caller hands to the store,
`await store.write(schedules.fire_schedule(...))` or `await store.read(...)`. An
operation builds a fresh program each time it is called, so a backend may run it again
(PostgreSQL does after a connection lost before COMMIT), and `yield from op` runs it
inside another program.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any, Generic, Literal, ParamSpec, TypeVar

from cairn.models import RunStatus

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
P = ParamSpec("P")


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


Rounds = Literal["many", "one", "unknown"]
"""What is known of a write program's round trips: it may need several ("many"), it is
one round ("one"), or not known ("unknown": PostgreSQL tries it on throw-away copies)."""

Path = tuple[Rounds, float | None]
"""A write's path hint: its rounds, and when runs may be claimable after its commit
(None: no wake-up; 0.0: now). Only PostgreSQL reads it (see postgres/writes.py)."""

PathHint = Callable[..., Path]


class Operation(Generic[T_co]):
    """One call of a declared program, not run yet: what a caller hands to the store.

    Calling it (or iterating it, for `yield from`) builds a fresh program, so it is the
    re-runnable factory a backend needs.
    """

    __slots__ = ("args", "kind", "kwargs")

    def __init__(
        self, kind: OperationKind[Any, T_co], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.kind = kind
        self.args = args
        self.kwargs = kwargs

    def __call__(self) -> Program[T_co]:
        """A fresh program of this call (a backend calls it again to run it afresh)."""
        return self.kind.program(*self.args, **self.kwargs)

    def __iter__(self) -> Program[T_co]:
        """A fresh program, so that `yield from op` runs it inside another program."""
        return self.kind.program(*self.args, **self.kwargs)

    def one_plan(self) -> bool:
        """True if its statements' best plan does not depend on their values (`one_plan`)."""
        fits = self.kind.one_plan
        return fits is not None and fits(*self.args, **self.kwargs)

    def path(self) -> Path | None:
        """Its path hint (see `path`), None if its program declares none."""
        hint = self.kind.path
        return None if hint is None else hint(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        return f"<operation {self.kind.name}>"


class OperationKind(Generic[P, T_co]):
    """A program declared `@operation`: calling it makes an `Operation` of it."""

    __slots__ = ("name", "one_plan", "path", "program", "rounds", "wakes")

    def __init__(
        self,
        program: Callable[P, Program[T_co]],
        path: PathHint | None,
        rounds: Rounds | None = None,
    ) -> None:
        self.program = program
        self.path = path
        # The rounds of every call when declared as such (`@path("one")`), None when they
        # depend on the arguments or are not declared: read before every write.
        self.rounds = rounds
        self.wakes = program.__code__ in _WAKES  # see `wakes`, found once
        self.one_plan: Callable[..., bool] | None = _ONE_PLAN.get(program.__code__)
        self.name = program.__name__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Operation[T_co]:
        """The operation of a call with these arguments (nothing runs yet)."""
        return Operation(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<operation kind {self.name}>"


_PATHS: dict[CodeType, Rounds | PathHint] = {}
_ONE_PLAN: dict[CodeType, Callable[..., bool]] = {}


def operation(fn: Callable[P, Program[T]]) -> OperationKind[P, T]:
    """Declare `fn` a store operation: outermost, above `@wakes`, `@single_write`, `@path`."""
    hint = _PATHS.get(fn.__code__)
    if isinstance(hint, str):
        known: Path = (hint, 0.0 if fn.__code__ in _WAKES else None)
        return OperationKind(fn, lambda *args, **kwargs: known, hint)
    return OperationKind(fn, hint)


def path(hint: Rounds | Callable[P, Path]) -> Callable[[F], F]:
    """Declare a write program's path on PostgreSQL: its rounds and its wake-up.

    `hint` is the rounds alone (the wake-up is then now if the program `@wakes`, else
    none), or a function of the program's own arguments giving both. A program without a
    hint runs alone in its own transaction there (see postgres/writes.py). SQLite, which
    commits every write the same way, ignores it.
    """

    def declare(fn: F) -> F:
        _PATHS[fn.__code__] = hint
        return fn

    return declare


def one_plan(fits: Callable[P, bool]) -> Callable[[F], F]:
    """Declare when a read program's statements have one best plan whatever their values.

    `fits` takes the program's own arguments. `store.read` then runs such a call as
    `read_one_plan` (PostgreSQL plans its statements once; SQLite reads as usual).
    """

    def declare(fn: F) -> F:
        _ONE_PLAN[fn.__code__] = fits
        return fn

    return declare
