"""An engine embedded in a process that lives on after closing it (a web app, a script).

`python -m tests.chaos.late_beat URL DIR`: serves with a 1.5 s lease, writing its worker
id to DIR/id and a line to DIR/beats as each heartbeat begins and ends. Once DIR/stop exists it
closes the engine (the test has made the database silent meanwhile); then it waits for
its heartbeat thread to end, writes DIR/done, and exits.

The heartbeat's connection waits 60 s for an answer here (not 10 s, nor SQLite's 5 s), so
that the beat in flight when the engine closes is still waiting when the test lets the
database answer again, whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import cairn
from cairn.store.postgres.side_channel import PostgresSideChannel
from cairn.store.postgres.store import PostgresStore
from cairn.store.sqlite.connections import SqliteSideChannel
from cairn.store.sqlite.store import SqliteStore

DIR = Path(sys.argv[2])


def _noted(channel: Any) -> Any:
    beat = channel.beat

    def noted(*args: Any) -> Any:
        with (DIR / "beats").open("a") as out:
            out.write("begun\n")
        try:
            return beat(*args)
        finally:
            with (DIR / "beats").open("a") as out:
                out.write("ended\n")

    channel.beat = noted
    return channel


PostgresStore.side_channel = lambda self: _noted(  # type: ignore[method-assign]
    PostgresSideChannel(self._conninfo, where=self.where, deadline=60.0)
)
SqliteStore.side_channel = lambda self: _noted(  # type: ignore[method-assign]
    SqliteSideChannel(self.path, wait=60.0)
)


@cairn.workflow("late_beat.idle")
async def idle() -> None:
    """Never started: the worker only has to be serving."""


async def main() -> None:
    engine = cairn.Engine(sys.argv[1], workers=2, lease="1.5s", poll_interval=0.1)
    async with engine:
        assert engine.worker is not None
        (DIR / "id").write_text(engine.worker.env.owner)
        while not (DIR / "stop").exists():
            await asyncio.sleep(0.02)
    for thread in threading.enumerate():
        if thread.name == "cairn-heartbeat":
            await asyncio.to_thread(thread.join)
    (DIR / "done").touch()


if __name__ == "__main__":
    asyncio.run(main())
