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
from typing import Any, Generic, Literal, ParamSpec, TypeVar, overload

from cairn.models import RunStatus
from cairn.store._sql.statement import Lock

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
    change under way is waited for and then read), or `FOR NO KEY UPDATE` ("hold": the
    lock an UPDATE of the rows takes, taken ahead, waiting), or `FOR NO KEY UPDATE SKIP
    LOCKED` ("try": those of them nobody else holds); SQLite needs nothing (its write
    transaction is exclusive). A statement whose rows are always locked says so where it
    is declared (`_sql.Statement`'s `lock`).
    """

    text: str
    params: Sequence[Any] = ()
    fetch: Literal["count", "one", "all"] = "count"
    lock: Lock = ""


Program = Generator[Sql, Any, T]
F = TypeVar("F", bound=Callable[..., Program[Any]])

FINISHED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)
# Finished for good: a run leaves a finished status only through control.retry_run, and
# only from FAILED.
FINAL = FINISHED - {RunStatus.FAILED}

# What a program's decorators declare, kept on its function until `@operation` reads it.
_DECLARED = "_operation_facts"


def _declare(fn: F, **facts: Any) -> F:
    # On the function itself: what it declares travels with it, whatever its name.
    declared: dict[str, Any] = vars(fn).setdefault(_DECLARED, {})
    declared.update(facts)
    return fn


@overload
def single_write(fn: F, /) -> F: ...
@overload
def single_write(*, when: Callable[..., bool]) -> Callable[[F], F]: ...
def single_write(
    fn: F | None = None, /, *, when: Callable[..., bool] | None = None
) -> F | Callable[[F], F]:
    """Declare that `fn`'s programs change rows only with their last statement.

    Such a program raises nothing once it has changed a row, so when it fails it has
    changed nothing (SQLite undoes a failing statement by itself), and a backend need not
    guard it with a savepoint. SqliteStore checks the promise: a program that breaks it
    rolls its whole batch back rather than leave part of its work behind. `when`, a
    function of the program's own arguments, makes the promise for some calls only.
    """
    if fn is not None:
        return _declare(fn, single_write=_always)
    fits = when

    def declare(fn: F) -> F:
        return _declare(fn, single_write=fits)

    return declare


# A fenced write's one statement, from its program's arguments: its text, its parameters
# and the run whose lease fences it (see `fenced`).
Fenced = tuple[str, tuple[Any, ...], str]


def fenced(statement: Callable[..., Fenced]) -> Callable[[F], F]:
    """Declare that `fn`'s program is the one statement `statement(*args)` gives, fenced.

    The program sends that statement and raises LeaseLost for its run when it changed no
    row (the run's lease is not held), else returns None: a backend may run the statement
    itself, without the program (SqliteStore, for a step's row in a group commit). The
    program should be written with `statement` too, so that the two cannot differ.
    """

    def declare(fn: F) -> F:
        return _declare(fn, fenced=statement, single_write=_always)  # one statement

    return declare


def wakes(fn: F) -> F:
    """Declare that after `fn`'s programs commit, a run may be claimable at once.

    The store then wakes its workers' claim loops (on PostgreSQL, other processes' too,
    through NOTIFY) instead of leaving them to their next poll.
    """
    return _declare(fn, wakes=True)


def wakes_after(when: Callable[..., float | None]) -> Callable[[F], F]:
    """Declare when, after a call of the program commits, a run it wrote may be claimable.

    `when` takes the call's outcome, then the program's own arguments, and gives the time
    (epoch seconds; a past one is now) or None (nothing to wake). SqliteStore, which
    wakes its claim loops after the commit, reads it; PostgreSQL sends its NOTIFY within
    the transaction, before the outcome is known, so it reads `@wakes` and `@path`.
    """

    def declare(fn: F) -> F:
        return _declare(fn, wakes_after=when)

    return declare


def _always(*args: Any, **kwargs: Any) -> bool:
    return True


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
    re-runnable factory a backend needs. What its program declared is read through it:
    `kind.wakes`, and the facts that depend on the call's arguments (the methods below).
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

    def lone(self) -> bool:
        """True if its first statement may commit it alone (see `lone`)."""
        fits = self.kind.lone
        return fits is not None and fits(*self.args, **self.kwargs)

    def single_write(self) -> bool:
        """True if its program changes rows only with its last statement (`single_write`)."""
        fits = self.kind.single_write
        return fits is not None and fits(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        return f"<operation {self.kind.name}>"


class OperationKind(Generic[P, T_co]):
    """A program declared `@operation`: calling it makes an `Operation` of it.

    It holds what the program's decorators declared: `wakes`, and as functions of a
    call's arguments (None: never) its `path` hint, `one_plan`, `lone` (`lone_always` if
    for every call), `single_write` (`single_write_always` if for every call), its
    `fenced` statement and `wakes_after` (which takes the call's outcome first).
    """

    __slots__ = (
        "fenced",
        "lone",
        "lone_always",
        "name",
        "one_plan",
        "path",
        "program",
        "single_write",
        "single_write_always",
        "wakes",
        "wakes_after",
    )

    def __init__(self, program: Callable[P, Program[T_co]], declared: dict[str, Any]) -> None:
        self.program = program
        self.name = program.__name__
        self.wakes: bool = declared.get("wakes", False)
        self.wakes_after: Callable[..., float | None] | None = declared.get("wakes_after")
        self.one_plan: Callable[..., bool] | None = declared.get("one_plan")
        self.fenced: Callable[..., Fenced] | None = declared.get("fenced")
        self.single_write: Callable[..., bool] | None = declared.get("single_write")
        # Declared for every call (plain `@single_write`): a backend need not ask each one.
        self.single_write_always = self.single_write is _always
        hint: Rounds | PathHint | None = declared.get("path")
        if isinstance(hint, str):
            known: Path = (hint, 0.0 if self.wakes else None)
            self.path: PathHint | None = lambda *args, **kwargs: known
        else:
            self.path = hint
        self.lone: Callable[..., bool] | None = declared.get("lone") or _one_round(hint)
        self.lone_always = self.lone is _always  # `@path("one")`: no call to ask

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Operation[T_co]:
        """The operation of a call with these arguments (nothing runs yet)."""
        # Operation.__init__'s work without its call: one operation is made per write.
        made: Operation[T_co] = object.__new__(Operation)
        made.kind, made.args, made.kwargs = self, args, kwargs
        return made

    def __repr__(self) -> str:
        return f"<operation kind {self.name}>"


def _one_round(hint: Rounds | PathHint | None) -> Callable[..., bool] | None:
    """A one-round write (`@path("one")`) is `lone`: it is its one statement."""
    if hint is None or isinstance(hint, str):
        return _always if hint == "one" else None
    path_of = hint
    return lambda *args, **kwargs: path_of(*args, **kwargs)[0] == "one"


def operation(fn: Callable[P, Program[T]]) -> OperationKind[P, T]:
    """Declare `fn` a store operation: outermost, above the decorators that declare its facts.

    Those (`@wakes`, `@wakes_after`, `@single_write`, `@path`, `@one_plan`, `@lone`) write
    on `fn` itself;
    this reads them once, into the `OperationKind`, so a backend asks the operation it is
    handed and never looks a function up.
    """
    return OperationKind(fn, vars(fn).get(_DECLARED, {}))


def path(hint: Rounds | Callable[P, Path]) -> Callable[[F], F]:
    """Declare a write program's path on PostgreSQL: its rounds and its wake-up.

    `hint` is the rounds alone (the wake-up is then now if the program `@wakes`, else
    none), or a function of the program's own arguments giving both. A program without a
    hint runs alone in its own transaction there (see postgres/writes.py). SQLite, which
    commits every write the same way, reads only whether it is one round (see `lone`).
    """

    def declare(fn: F) -> F:
        return _declare(fn, path=hint)

    return declare


def one_plan(fits: Callable[P, bool]) -> Callable[[F], F]:
    """Declare when a read program's statements have one best plan whatever their values.

    `fits` takes the program's own arguments. `store.read` then runs such a call as
    `read_one_plan` (PostgreSQL plans its statements once; SQLite reads as usual).
    """

    def declare(fn: F) -> F:
        return _declare(fn, one_plan=fits)

    return declare


def lone(fits: Callable[P, bool]) -> Callable[[F], F]:
    """Declare when a write's first statement may commit it alone, out of a transaction.

    For those calls (`fits` takes the program's own arguments) the first statement
    writes, and once it has changed a row the program asks for nothing more; if it
    changed none, the program runs again the usual way. SQLite then commits such a write
    as that one statement when nothing else is queued (sqlite/connections.py
    `commit_lone`). A write declared `@path("one")` is lone already.
    """

    def declare(fn: F) -> F:
        return _declare(fn, lone=fits)

    return declare
