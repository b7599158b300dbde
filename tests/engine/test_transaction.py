"""@cairn.transaction in workflows: commit with the checkpoint, rollback and retry, replay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.authoring.transaction import TransactionDef, make_transaction
from cairn.testing import TestEngine

from .kit import WAIT, Gate, Kit

FAST = cairn.Retry(max_attempts=3, delay=0, max_delay=0)


def transaction(
    kit: Kit, name: str, *, retries: Any = FAST, timeout: Any = None
) -> Callable[[Callable[..., Any]], TransactionDef[..., Any]]:
    """Like `@cairn.transaction`, registering in the kit's registry."""

    def decorate(fn: Callable[..., Any]) -> TransactionDef[..., Any]:
        return make_transaction(fn, name, retries, timeout, kit.registry)

    return decorate


def _ph(kit: Kit) -> str:
    return "?" if kit.url.startswith("sqlite") else "%s"


def _rows(kit: Kit) -> list[tuple[Any, ...]]:
    return sorted(execute(kit.url, "SELECT item FROM ledger"))


async def _insert(conn: Any, kit: Kit, item: str) -> None:
    """INSERT through the connection cairn hands an async function (driver-specific)."""
    result = conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", (item,))
    if asyncio.iscoroutine(result):
        await result


async def _prepared(kit: Kit) -> None:
    execute(kit.url, "CREATE TABLE IF NOT EXISTS ledger (item TEXT)")


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_transaction__writes_and_result_commit_with_the_checkpoint(
    kit: Kit, sync: bool
) -> None:
    if sync:

        @transaction(kit, "book")
        def book(conn: Any, item: str) -> str:
            conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", (item,))
            return f"booked {item}"

    else:

        @transaction(kit, "book")
        async def book(conn: Any, item: str) -> str:  # type: ignore[misc]
            await _insert(conn, kit, item)
            return f"booked {item}"

    @kit.workflow("txn.book")
    async def flow(item: str) -> str:
        return await book(item)

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow, "a")
        assert await run.result(timeout=WAIT) == "booked a"
        [entry] = await engine.history(run.run_id)
    assert (entry.key, entry.status, entry.attempts, entry.result) == (
        "book#1",
        "completed",
        1,
        "booked a",
    )
    assert entry.input == {"args": ["a"], "kwargs": {}}  # the connection is no input
    assert _rows(kit) == [("a",)]


async def test_transaction__exception_rolls_back_and_the_attempt_is_retried(kit: Kit) -> None:
    calls: list[int] = []

    @transaction(kit, "book")
    def book(conn: Any, item: str) -> int:
        calls.append(1)
        conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", (f"{item}{len(calls)}",))
        if len(calls) < 3:
            raise ValueError(f"boom {len(calls)}")
        return len(calls)

    @kit.workflow("txn.retry")
    async def flow() -> int:
        return int(await book("a"))

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == 3
        failed = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)
    assert [(a["attempt"], a["error_type"], a["message"]) for a in failed] == [
        (1, "builtins.ValueError", "boom 1"),
        (2, "builtins.ValueError", "boom 2"),
    ]
    assert (entry.status, entry.attempts) == ("completed", 3)
    assert _rows(kit) == [("a3",)]  # the failed attempts' rows were rolled back


async def test_transaction__failed_for_good_leaves_no_rows(kit: Kit) -> None:
    @transaction(kit, "book", retries=2)
    async def book(conn: Any) -> None:
        await _insert(conn, kit, "never")
        raise cairn.FatalError("the order is gone")

    @kit.workflow("txn.fatal")
    async def flow() -> str:
        try:
            await book()
        except cairn.StepFailed as failed:
            return f"{failed.step_name} {failed.attempts} {failed.fatal}"
        return "no error"

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "book 1 True"
    assert _rows(kit) == []


async def test_transaction__replay_returns_the_recorded_result_without_calling(
    kit: Kit, gate: Gate
) -> None:
    calls: list[str] = []

    @transaction(kit, "book")
    def book(conn: Any, item: str) -> str:
        calls.append(item)
        conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", (item,))
        return f"booked {item}"

    wait = kit.step("wait")(gate)

    @kit.workflow("txn.replay")
    async def flow() -> list[str]:
        booked = await book("a")
        return [booked, await wait()]

    first = kit.engine()
    await first.__aenter__()
    await _prepared(kit)
    run = await first.start(flow)
    await gate.hold(first)  # closed mid-run: the next engine replays the run
    async with kit.engine() as second:
        handle = await second.get(run.run_id)
        assert await handle.result(timeout=WAIT) == ["booked a", "through"]
    assert calls == ["a"]
    assert _rows(kit) == [("a",)]


async def test_transaction__unserializable_result_rolls_back_its_rows(kit: Kit) -> None:
    @transaction(kit, "book")
    async def book(conn: Any) -> object:
        await _insert(conn, kit, "a")
        return object()

    @kit.workflow("txn.unserializable")
    async def flow() -> str:
        try:
            await book()
        except cairn.SerializationError as exc:
            return type(exc).__name__
        return "stored"

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "SerializationError"
    assert _rows(kit) == []


async def test_transaction__ending_the_transaction_itself_fails_for_good(kit: Kit) -> None:
    @transaction(kit, "book")
    def book(conn: Any) -> None:
        conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", ("early",))
        conn.commit()  # not the step's to do: cairn commits it with the checkpoint

    @kit.workflow("txn.ended")
    async def flow() -> str:
        try:
            await book()
        except cairn.StepFailed as failed:
            return f"{failed.fatal} {failed.attempts} {failed.message}"
        return "no error"

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        result = await run.result(timeout=WAIT)
    assert result.startswith("True 1 transaction step 'book' ended its transaction itself")


async def test_transaction__timeout_rolls_back_and_retries(kit: Kit) -> None:
    calls: list[int] = []

    @transaction(kit, "book", timeout="100ms")
    async def book(conn: Any) -> int:
        calls.append(1)
        await _insert(conn, kit, f"try{len(calls)}")
        if len(calls) == 1:
            await asyncio.sleep(5)
        return len(calls)

    @kit.workflow("txn.timeout")
    async def flow() -> int:
        return int(await book())

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == 2
        [failed] = await engine.control.attempts(run.run_id)
    assert failed["error_type"] == "cairn.errors.StepTimeout"
    assert _rows(kit) == [("try2",)]


async def test_transaction__concurrent_steps_and_runs_each_commit_once(kit: Kit) -> None:
    @transaction(kit, "book")
    async def book(conn: Any, item: str) -> str:
        await _insert(conn, kit, item)
        await asyncio.sleep(0)  # let the others in while the transaction is open
        return item

    @transaction(kit, "sbook")
    def sbook(conn: Any, item: str) -> str:
        conn.execute(f"INSERT INTO ledger (item) VALUES ({_ph(kit)})", (item,))
        return item

    @kit.workflow("txn.gather")
    async def flow(n: int) -> list[str]:
        return list(await asyncio.gather(book(f"{n}a"), sbook(f"{n}b"), book(f"{n}c")))

    async with kit.engine(workers=8) as engine:
        await _prepared(kit)
        runs = [await engine.start(flow, n) for n in range(8)]
        results = [await run.result(timeout=WAIT) for run in runs]
    assert results == [[f"{n}a", f"{n}b", f"{n}c"] for n in range(8)]
    assert _rows(kit) == sorted((f"{n}{x}",) for n in range(8) for x in "abc")


async def test_transaction__caught_failing_statement_on_postgres_is_retried(pg_url: str) -> None:
    # PostgreSQL only: SQLite keeps a transaction open after a failed statement.
    kit = Kit(pg_url)
    calls: list[int] = []

    @transaction(kit, "book")
    async def book(conn: Any) -> int:
        calls.append(1)
        await conn.execute("INSERT INTO ledger (item) VALUES (%s)", (f"try{len(calls)}",))
        if len(calls) == 1:
            try:
                await conn.execute("SELECT no_such_column FROM ledger")
            except Exception:  # swallowed: PostgreSQL has aborted the transaction anyway
                pass
        return len(calls)

    @kit.workflow("txn.aborted")
    async def flow() -> int:
        return int(await book())

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == 2
        [failed] = await engine.control.attempts(run.run_id)
    assert "the database aborted it" in failed["message"]
    assert _rows(kit) == [("try2",)]


async def test_transaction__test_engine_in_memory_crash_and_recover() -> None:
    registry = cairn.Registry()
    calls: list[str] = []

    def book(conn: Any, item: str) -> int:
        calls.append(item)
        conn.execute("CREATE TABLE IF NOT EXISTS ledger (item TEXT)")
        conn.execute("INSERT INTO ledger (item) VALUES (?)", (item,))
        return int(conn.execute("SELECT count(*) FROM ledger").fetchone()[0])

    step = make_transaction(book, "book", None, None, registry)

    async def flow() -> list[int]:
        return [await step("a"), await step("b")]

    from cairn.authoring.workflow import make_workflow

    wf = make_workflow(flow, name="txn.memory", reg=registry)
    async with TestEngine(registry=registry) as env:
        env.crash_after_step("book")  # "killed" right after the first one commits
        run = await env.start(wf)
        await env.settle()
        await env.recover()
        assert await run.result(timeout=WAIT) == [1, 2]
        rows = env.store.conn.execute("SELECT item FROM ledger ORDER BY item").fetchall()
    assert calls == ["a", "b"]  # the committed step was replayed, not called again
    assert rows == [("a",), ("b",)]


def test_transaction__bad_inputs_fail_with_clear_errors(offline_kit: Kit) -> None:
    with pytest.raises(ValueError, match=r"db='orders' is not supported; only db=None"):
        cairn.transaction(db="orders")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="name must be a string, got 3"):
        cairn.transaction(3)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="timeout of step 'x'"):
        make_transaction(lambda conn: None, "x", None, "soon", offline_kit.registry)
    with pytest.raises(TypeError, match="needs a function"):
        make_transaction("nope", "y", None, None, offline_kit.registry)  # type: ignore[arg-type]

    step = make_transaction(lambda conn: None, "outside", None, None, offline_kit.registry)
    with pytest.raises(cairn.NotInRun, match=r"transaction step 'outside' only works inside"):
        step()


async def test_transaction__called_inside_a_step_is_refused(kit: Kit) -> None:
    @transaction(kit, "inner")
    def inner(conn: Any) -> None:
        return None

    @kit.step("outer", retries=1)
    async def outer() -> str:
        try:
            inner()
        except cairn.NotInRun as exc:
            return str(exc)
        return "no error"

    @kit.workflow("txn.nested")
    async def flow() -> str:
        return str(await outer())

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == (
            "transaction step 'inner' cannot be called inside step 'outer': a step runs "
            "once and is not replayed; call it from the workflow"
        )


async def test_transaction__savepoint_lets_the_function_go_on_after_a_failed_statement(
    pg_url: str,
) -> None:
    kit = Kit(pg_url)

    @transaction(kit, "book")
    async def book(conn: Any) -> str:
        await conn.execute("INSERT INTO ledger (item) VALUES (%s)", ("kept",))
        try:
            async with conn.transaction():  # inside cairn's transaction: a savepoint
                await conn.execute("INSERT INTO ledger (item) VALUES (%s)", ("undone",))
                await conn.execute("SELECT no_such_column FROM ledger")
        except Exception as exc:
            return type(exc).__name__
        return "no error"

    @kit.workflow("txn.savepoint")
    async def flow() -> str:
        return str(await book())

    async with kit.engine() as engine:
        await _prepared(kit)
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "UndefinedColumn"
        assert await engine.control.attempts(run.run_id) == []
    assert _rows(kit) == [("kept",)]


async def test_transaction__a_transient_run_is_refused(kit: Kit) -> None:
    calls: list[int] = []

    @transaction(kit, "book")
    def book(conn: Any) -> None:
        calls.append(1)

    @kit.workflow("txn.transient", durable=False)
    async def flow() -> None:
        await book()

    async with kit.engine() as engine:
        handle = await engine.start(flow)
        with pytest.raises(
            cairn.RunFailed, match=r"'txn.transient' is transient.*cannot run transaction steps"
        ):
            await handle.result(timeout=WAIT)
    assert calls == []


async def test_transaction__awaiting_its_own_engine_on_sqlite_fails_instead_of_hanging(
    sqlite_url: str,
) -> None:
    kit = Kit(sqlite_url)
    engines: list[cairn.Engine] = []

    @kit.workflow("txn.other")
    async def other() -> None:
        return None

    @transaction(kit, "book", retries=1)
    async def book(conn: Any) -> None:
        await engines[0].start(other)  # would wait for this very transaction to end

    @kit.workflow("txn.self_write")
    async def flow() -> str:
        try:
            await book()
        except cairn.StepFailed as failed:
            return failed.message
        return "no error"

    async with kit.engine() as engine:
        engines.append(engine)
        run = await engine.start(flow)
        message = await run.result(timeout=WAIT)
    assert "wrote through the engine" in message and "would wait for it forever" in message
