"""The event-loop watchdog names what blocks the loop: the user's code, or cairn's own.

A blob sweep that read every stored value on the loop (cairn's housekeeping, in its
task 'cairn-retention') was reported as "task 'cairn-retention' (workflow code, not a
step)": the user was told to fix code that was not theirs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.runtime.watchdog import LoopWatchdog
from cairn.store.programs.base import Program, all_rows
from cairn.store.sqlite import connections
from cairn.store.sqlite.store import SqliteStore

LIMIT = 0.3  # seconds of stall before the watchdog warns

# A statement that never ends: SQLite computes it on the loop's thread until interrupted.
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"


def endless() -> Program[Any]:
    rows = yield all_rows(ENDLESS, [])
    return rows


class Warnings(logging.Handler):
    """Keeps the watchdog's warnings; calls `then` after the first (from its thread)."""

    def __init__(self, then: Any = None) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.then = then

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if self.then is not None:
            self.then()


@pytest.fixture
def warnings() -> Iterator[Warnings]:
    handler = Warnings()
    logger = logging.getLogger("cairn.worker")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture
async def watchdog() -> AsyncIterator[LoopWatchdog]:
    dog = LoopWatchdog(asyncio.get_running_loop(), limit=LIMIT, describe=lambda task: None)
    dog.start()
    await asyncio.sleep(0.2)  # it has seen the loop answer (and so knows its thread)
    yield dog
    dog.stop()


async def test_watchdog__a_stall_in_cairns_own_code_is_not_blamed_on_the_workflow(
    tmp_path: Path, watchdog: LoopWatchdog, warnings: Warnings
) -> None:
    store = SqliteStore(str(tmp_path / "cairn.db"))
    await store.open()
    warnings.then = store.conn.interrupt  # the warning ends the statement
    rescue = threading.Timer(30, store.conn.interrupt)  # if it never comes
    rescue.start()
    try:
        housekeeping = asyncio.create_task(store.read(endless), name="cairn-housekeeping")
        with pytest.raises(Exception, match="interrupt"):
            await housekeeping
    finally:
        rescue.cancel()
        await store.close()

    assert len(warnings.messages) == 1, warnings.messages
    [message] = warnings.messages
    assert (
        "by cairn's own code (cairn.store.sqlite.connections.execute < "
        "cairn.store.sqlite.connections.run < cairn.store.sqlite.store.SqliteStore.read, "
        "in task 'cairn-housekeeping')"
    ) in message
    assert "workflow code, not a step" not in message
    assert "report it to cairn" in message


def crunch(seconds: float) -> None:
    time.sleep(seconds)  # the user's blocking call, in the user's function


async def test_watchdog__a_stall_in_the_users_code_still_names_the_users_task(
    watchdog: LoopWatchdog, warnings: Warnings
) -> None:
    async def users() -> None:
        crunch(3 * LIMIT)

    await asyncio.create_task(users(), name="reports")

    assert len(warnings.messages) == 1, warnings.messages
    [message] = warnings.messages
    assert "by task 'reports' (workflow code, not a step)" in message
    assert "cairn's own code" not in message


def report(store: SqliteStore) -> Any:
    return connections.run(store.conn, endless())  # the user's code calls into cairn


async def test_watchdog__the_users_code_blocked_in_cairn_is_named_with_cairns(
    tmp_path: Path, watchdog: LoopWatchdog, warnings: Warnings
) -> None:
    store = SqliteStore(str(tmp_path / "cairn.db"))
    await store.open()
    warnings.then = store.conn.interrupt
    rescue = threading.Timer(30, store.conn.interrupt)
    rescue.start()

    async def users() -> None:
        report(store)

    try:
        with pytest.raises(Exception, match="interrupt"):
            await asyncio.create_task(users(), name="reports")
    finally:
        rescue.cancel()
        await store.close()

    assert len(warnings.messages) == 1, warnings.messages
    [message] = warnings.messages
    assert (
        "by task 'reports', in cairn's cairn.store.sqlite.connections.execute called from "
        f"{__name__}.report: "
    ) in message
    assert "Await instead of blocking" in message
