"""A heartbeat that lands after its worker stopped (an engine closed on a silent database).

A worker stops beating before it removes its row. A beat already sent then, waiting for
a lock or a server that does not answer, used to land later all the same: it renewed
the row of a worker that had stopped (its removal had had no time), so that worker
looked alive for one more lease, in `cairn workers`, to claims (its runs held) and to
the rolling-deploy check (its versions served); and had the removal gone through first,
the beat would have put the row back. These scenarios close a real engine in a process
that lives on, let the database answer again, and read the row once the beat has ended.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import ROOT

from cairn.store import open_store
from cairn.store.programs import workers as worker_ops

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

DEADLINE = 60.0
# The worker's stop is over; its removal had no time (the database is silent).
STOPPED = "stopped without handing its runs back"


def _until(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not ready():
        assert proc.poll() is None, f"exited before {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE:g} s:\n{log.read_text()}"
        time.sleep(0.02)


def _beats(folder: Path, what: str = "begun") -> int:
    path = folder / "beats"
    return path.read_text().splitlines().count(what) if path.exists() else 0


def _just_beaten(folder: Path, after: int) -> bool:
    """A beat ended (the `after`th or later) and the next has not begun: a lease / 3 away."""
    begun = _beats(folder)
    return begun > after and _beats(folder, "ended") == begun


@contextlib.contextmanager
def _silence(
    request: pytest.FixtureRequest, store_url: str
) -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(the URL the engine uses, make the database silent, let it answer again)."""
    if store_url.startswith("sqlite"):
        path = store_url.removeprefix("sqlite:///")
        holder = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            # An outside connection holding the write lock: every writer waits.
            yield (
                store_url,
                lambda: holder.execute("BEGIN IMMEDIATE"),
                lambda: holder.execute("COMMIT"),
            )
        finally:
            holder.close()
        return
    freezing = request.getfixturevalue("freezing")

    def thaw() -> None:
        freezing.thaw()
        freezing.restore()

    # A hung network path: nothing answers, nothing fails.
    yield freezing.url(store_url.rsplit("/", 1)[1]), lambda: freezing.freeze(new=True), thaw


async def _row(url: str, worker_id: str) -> object:
    store = open_store(url)
    await store.open()
    try:
        return await store.read(worker_ops.get_worker(worker_id))
    finally:
        await store.close()


def test_late_heartbeat__after_the_engine_closed_on_a_silent_database_writes_nothing(
    request: pytest.FixtureRequest, store_url: str, tmp_path: Path
) -> None:
    import asyncio

    log = tmp_path / "engine.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    with _silence(request, store_url) as (url, silence, answer), open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.late_beat", url, str(tmp_path)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            _until("worker", (tmp_path / "id").exists, proc, log)
            worker_id = (tmp_path / "id").read_text()
            _until("a heartbeat", lambda: _just_beaten(tmp_path, 1), proc, log)
            silenced_at = time.time()
            silence()
            begun = _beats(tmp_path)
            # The next beat waits for the database (one under way now only makes this slow).
            _until("a beat on the silent database", lambda: _beats(tmp_path) > begun, proc, log)
            (tmp_path / "stop").touch()
            _until("the worker's stop", lambda: STOPPED in log.read_text(), proc, log)
            answer()
            _until("the heartbeat's end", (tmp_path / "done").exists, proc, log)
            assert proc.wait(timeout=DEADLINE) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    row = asyncio.run(_row(store_url, worker_id))
    assert row is not None, text  # left for the lease to run out, as after a crash
    assert row.heartbeat_at < silenced_at, (row, silenced_at, text)  # type: ignore[attr-defined]
