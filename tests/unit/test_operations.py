"""Store operations: a program declared `@operation`, called into a re-runnable Operation."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import cairn.store.programs
from cairn.store import LeaseLost
from cairn.store.programs import journal
from cairn.store.programs.base import (
    Operation,
    OperationKind,
    Program,
    Sql,
    fenced,
    lone,
    operation,
    path,
    single_write,
    wakes,
)
from cairn.store.records import Lease, StepRecord


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
@single_write(when=lambda n, *, alone=True: alone)
@lone(lambda n, *, alone=True: n > 0)
def _maybe(n: int, *, alone: bool = True) -> Program[int]:
    got: int = yield Sql("UPDATE t SET n = ?", (n,))
    return got


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


def test_operation__the_operation_keeps_what_its_program_declared():
    assert _count(1).kind.wakes and not _count(1).single_write()
    assert _plain().single_write() and not _plain().kind.wakes
    assert not _twice().kind.wakes and not _twice().single_write()


def test_operation__facts_declared_for_some_calls_hold_for_those_calls_only():
    assert _maybe(1).lone() and not _maybe(-1).lone()
    assert _maybe(1).single_write() and not _maybe(1, alone=False).single_write()


def test_operation__a_one_round_path_makes_a_write_lone():
    assert _count(1).lone()  # @path(lambda ...: ("one", ...))
    assert not _plain().lone()  # @path("unknown")
    assert not _twice().lone()  # nothing declared


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


@operation
@fenced(lambda n: ("UPDATE t SET n = ?", (n,), f"r{n}"))
def _fenced(n: int) -> Program[None]:
    if not (yield Sql("UPDATE t SET n = ?", (n,))):
        raise LeaseLost(f"r{n}")


def test_operation__a_fenced_write_is_a_single_write_its_statement_declared():
    assert _fenced(1).kind.fenced is not None and _fenced(1).single_write()
    assert _plain().kind.fenced is None


def test_operation__a_step_s_fenced_row_is_what_its_program_sends_and_checks():
    # SqliteStore runs the declared statement in place of the program: they must agree.
    record = StepRecord("r1", 3, "add#3", "step", "add", "completed", 1, 1.0, 2.0, "4", None, "[3]")
    op = journal.record_step(Lease("w1", 7), record)
    assert op.kind.fenced is not None
    text, params, run_id = op.kind.fenced(*op.args, **op.kwargs)
    program = op()
    sent = next(program)
    assert (sent.text, tuple(sent.params), sent.fetch) == (text, params, "count")
    assert params[-3:] == ("r1", "w1", 7) and run_id == "r1"
    with pytest.raises(StopIteration):
        program.send(1)  # a row written: done
    program = op()
    next(program)
    with pytest.raises(LeaseLost):
        program.send(0)  # no row: the run's lease is not held
