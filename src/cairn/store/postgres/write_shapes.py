"""The shapes of writes: which are one round ("shots"), and what one makes of its results.

`writes.Writes` reads a write's shape here to pick its path on PostgreSQL (alone, lone or
group commit). A program started to read its name is not started twice (`first_then`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cairn.store.postgres import dialect
from cairn.store.postgres.connections import Native, Program, Request
from cairn.store.programs import base
from cairn.store.programs.base import Sql

T = TypeVar("T")
Make = Callable[[], Program[Any]]


def first_request(make: Make) -> tuple[Program[Any], Request] | None:
    """A program known to be one round, started: it and its request (None if it makes none)."""
    program = make()
    try:
        request = next(program)
    except StopIteration:
        return None
    if isinstance(request, Native):
        program.close()
        return None
    return program, request


def lone_statement(request: Request) -> tuple[str, Sequence[Any]] | None:
    """The statement and parameters of a request that is one row-count statement, else None."""
    if not isinstance(request, Sql) or request.fetch != "count":
        return None
    statements = dialect.program_statements(request.text, request.params, lock=request.lock)
    return statements[0] if len(statements) == 1 else None


def one_round(make: Make) -> Sql | list[Sql | Native] | None:
    """The request a program makes if it is a shot, None if it may need another round.

    A program whose first request is a list sends everything at once by design. One that
    asks for a single statement's row count is a shot if it finishes (or raises) whatever
    that count is; it is tried with a few counts on throw-away copies of the program.
    """
    try:
        first = next(make())
    except StopIteration:
        return None
    if isinstance(first, list):
        return first
    if isinstance(first, Native) or first.fetch != "count":
        return None
    for count in (0, 1, 2):
        program = make()
        next(program)
        try:
            program.send(count)
        except StopIteration:
            continue
        except Exception:  # LeaseLost and the like end it too
            continue
        program.close()
        return None
    return first


def outcome(program: Program[Any], results: Any) -> Any:
    """What a one-round program makes of its results: a value, or the exception it raised.

    The exception is returned, not raised: one shot's LeaseLost must not fail its batch.
    """
    try:
        program.send(results)
    except StopIteration as done:
        return done.value
    except Exception as exc:  # LeaseLost, or a bug: this shot's alone
        return exc
    program.close()
    return RuntimeError("cairn: a one-round write asked for a second round")


def first_then(
    program: base.Program[T], make: Callable[[], base.Program[T]]
) -> Callable[[], base.Program[T]]:
    """A maker that hands out `program` first, then fresh ones from `make`."""
    ready = [program]

    def fresh() -> base.Program[T]:
        return ready.pop() if ready else make()

    return fresh
