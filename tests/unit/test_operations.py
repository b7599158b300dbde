"""Store operations: a program declared `@operation`, called into a re-runnable Operation."""

from __future__ import annotations

import importlib
import pkgutil

import cairn.store.programs
from cairn.store.programs.base import (
    Operation,
    OperationKind,
    Program,
    Sql,
    is_single_write,
    is_waking,
    operation,
    path,
    single_write,
    wakes,
)


@operation
@wakes
@path(lambda n, *, later=False: ("one", 5.0 if later else None))
def _count(n: int, *, later: bool = False) -> Program[int]:
    got: int = yield Sql("UPDATE t SET n = ?", (n,))
    return got * 2


@operation
@single_write
@path("unknown")
def _plain() -> Program[None]:
    yield Sql("DELETE FROM t")


@operation
def _twice() -> Program[int]:
    first = yield from _count(1)
    second = yield from _count(2)
    return first + second


def _drive(program: Program[int], answer: int) -> int:
    try:
        next(program)
        while True:
            program.send(answer)
    except StopIteration as done:
        return int(done.value)


def test_operation__each_call_builds_a_fresh_program_so_a_backend_can_run_it_again():
    op = _count(3)
    assert isinstance(op, Operation)
    assert _drive(op(), 1) == 2
    assert _drive(op(), 4) == 8  # the first run is spent; the second starts afresh


def test_operation__the_program_keeps_its_flags():
    assert is_waking(_count(1)()) and not is_single_write(_count(1)())
    assert is_single_write(_plain()()) and not is_waking(_plain()())


def test_operation__yield_from_runs_it_inside_another_program():
    assert _drive(_twice()(), 5) == 20


def test_operation__path_hints_come_from_the_programs_arguments():
    assert _count(1).path() == ("one", None)
    assert _count(1, later=True).path() == ("one", 5.0)
    assert _plain().path() == ("unknown", None)
    assert _twice().path() is None


def test_operation__every_declared_operation_has_a_documented_program():
    found = []
    for info in pkgutil.iter_modules(cairn.store.programs.__path__):
        module = importlib.import_module(f"cairn.store.programs.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, OperationKind) and value.program.__module__ == module.__name__:
                found.append(name)
                assert value.name == name
                assert value.program.__doc__, f"operation {module.__name__}.{name}"
    assert "fire_schedule" in found and "enqueue" in found
