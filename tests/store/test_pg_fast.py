"""PostgreSQL only: lone statements straight through libpq (`cairn.store.postgres.fast_path`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import psycopg
import pytest

from cairn.store.postgres import binary_arrays, fast_path
from cairn.store.postgres.fast_path import FastPath
from cairn.store.waits import Waits

INSERT = "INSERT INTO t VALUES (%s)"
# The reply comes later: anything already ready in the loop is ready first. Late enough
# that on a loaded machine it is not in yet when the wait begins (2 ms once was not).
INSERT_SLOWLY = "INSERT INTO t SELECT %s FROM pg_sleep(0.05)"


@pytest.fixture
async def fast(pg_url: str) -> AsyncIterator[FastPath]:
    conn = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    await conn.execute("CREATE TEMPORARY TABLE t (id INTEGER PRIMARY KEY)")
    try:
        yield FastPath(conn, Waits())
    finally:
        await conn.close()


async def test_count__rows_touched_whether_the_reply_is_quick_or_slow(fast: FastPath) -> None:
    assert await fast.count("INSERT INTO t VALUES (%s), (%s)", [1, 2]) == 2
    # Slower than the wait outside the event loop: the loop's reader takes over.
    slow = "UPDATE t SET id = id + 10 WHERE pg_sleep(%s) IS NOT NULL"
    assert await fast.count(slow, [fast_path._HERE_MS * 5 / 1000]) == 2
    assert await fast.count("DELETE FROM t WHERE id > %s", [10]) == 2


async def test_count__errors_are_raised_and_the_connection_stays_usable(fast: FastPath) -> None:
    await fast.count("INSERT INTO t VALUES (%s)", [1])
    with pytest.raises(psycopg.errors.UniqueViolation):
        await fast.count("INSERT INTO t VALUES (%s)", [1])
    slow_clash = "INSERT INTO t SELECT %s FROM pg_sleep(0.01)"
    with pytest.raises(psycopg.errors.UniqueViolation):
        await fast.count(slow_clash, [1])
    assert await fast.count("INSERT INTO t VALUES (%s)", [2]) == 1


async def _loop_turns(
    fast: FastPath, statements: int, counter: Callable[[], int], insert: str = INSERT
) -> int:
    """How many of `statements` lone inserts let the event loop run (`counter` moved)."""
    turns = 0
    for i in range(statements):
        before = counter()
        await fast.count(insert, [i])
        turns += counter() != before
    return turns


async def test_count__statements_in_a_row_still_let_the_event_loop_run(
    fast: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Waiting for replies outside the loop must not starve it (heartbeats) when a run's
    # steps never yield: with nothing else ready, the loop must still run at least once
    # every _HERE_ROUNDS + 1 statements, and not at every one.
    monkeypatch.setattr(fast_path, "others_ready", lambda loop: False)
    monkeypatch.setattr(fast_path, "_HERE_MS", 60_000)  # however slow the server is today
    loop = asyncio.get_running_loop()
    ticks = 0

    def tick() -> None:  # runs once per loop iteration
        nonlocal ticks
        ticks += 1
        handle[0] = loop.call_later(0, tick)

    handle = [loop.call_later(0, tick)]
    rounds = 4
    try:
        turns = await _loop_turns(fast, rounds * (fast_path._HERE_ROUNDS + 1), lambda: ticks)
    finally:
        handle[0].cancel()

    assert turns == rounds


async def test_count__other_io_ready_ends_the_wait_outside_the_loop(
    fast: FastPath, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs side by side must still overlap their commits: a reply is waited for outside
    # the loop only while nothing else the loop watches is ready. Here a socket always has
    # data for its reader, so every statement lets the loop run.
    monkeypatch.setattr(fast_path, "others_ready", lambda loop: False)
    monkeypatch.setattr(fast_path, "_HERE_MS", 60_000)
    loop = asyncio.get_running_loop()
    served = 0

    def serve() -> None:
        nonlocal served
        served += 1  # leaves the byte unread: the socket stays ready

    ours, theirs = socket.socketpair()
    theirs.send(b"x")
    loop.add_reader(ours.fileno(), serve)
    statements = 2 * (fast_path._HERE_ROUNDS + 1)
    try:
        turns = await _loop_turns(fast, statements, lambda: served, INSERT_SLOWLY)
    finally:
        loop.remove_reader(ours.fileno())
        ours.close()
        theirs.close()

    assert turns == statements


async def test_rows__what_a_statement_returns_with_binary_array_parameters(
    fast: FastPath,
) -> None:
    # A batch of one bulk statement goes this way: arrays in (`%b`), written keys out.
    ids = binary_arrays.encode(["integer"], [(1,), (2,), (3,)])
    assert ids is not None
    insert = "INSERT INTO t SELECT u.id FROM unnest(%b::integer[]) AS u(id) RETURNING id"

    assert sorted(await fast.rows(insert, ids)) == [(1,), (2,), (3,)]
    again = "INSERT INTO t SELECT u.id FROM unnest(%b::integer[]) AS u(id) ON CONFLICT DO NOTHING "
    assert await fast.rows(again + "RETURNING id", [[3, 4]]) == [(4,)]  # psycopg's lists too
    assert await fast.rows("DELETE FROM t WHERE id > %s RETURNING id", [10]) == []
