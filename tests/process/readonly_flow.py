"""A workflow whose middle step makes its worker's SQLite connection read-only, once.

Served by `cairn worker -m tests.process.readonly_flow`. Permissions are checked when a
file is opened and Linux refuses to remount a file system read-only while a process has a
file open for writing, so a running worker's own connection cannot be made read-only from
outside. `PRAGMA query_only` does it from inside: every write of that connection then
fails with SQLite's own SQLITE_READONLY, while the heartbeat's connection (opened
separately) still writes, as it would if only the worker's connection had been opened
read-only. The step does it the first time only (a file next to CAIRN_EFFECTS says it
was done), so another worker can finish the run.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import cairn
from cairn.store.sqlite import store as sqlite_store

EFFECTS = Path(os.environ.get("CAIRN_EFFECTS", "effects.txt"))
DONE = EFFECTS.with_name("made-read-only")
_connections: list[sqlite3.Connection] = []
_open_main = sqlite_store.open_main


async def _remember(path: str, *args: Any) -> sqlite3.Connection:
    conn = await _open_main(path, *args)
    _connections.append(conn)  # the store's own connection
    return conn


sqlite_store.open_main = _remember  # type: ignore[assignment]


def effect(line: str) -> None:
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


@cairn.step("first")
async def first() -> int:
    effect("first")
    return 1


@cairn.step("lock_out")
async def lock_out() -> int:
    effect("lock_out")
    if not DONE.exists():
        DONE.touch()
        for conn in _connections:
            conn.execute("PRAGMA query_only = ON")
    return 2


@cairn.step("last")
async def last() -> int:
    effect("last")
    return 3


@cairn.workflow("readonly.three")
async def three() -> int:
    return await first() + await lock_out() + await last()
