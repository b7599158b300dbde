"""A worker whose SQLite database turns read-only stops, says why once, and exits 1.

It cannot write anything (not even a hand-back), so it stops heartbeating and leaves its
runs to other workers; nothing in the file is damaged, and another worker finishes the run
from its last committed step.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn
from cairn.store import open_store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


def _worker(url: str, effects: Path) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "CAIRN_EFFECTS": str(effects),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn",
            "worker",
            "--db",
            url,
            "-m",
            "tests.process.readonly_flow",
            "--lease",
            "60s",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _effects(path: Path) -> Counter[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.rsplit(" pid=", 1)[0] for line in lines)


async def _stored(url: str, run_id: str) -> tuple[str, list[str]]:
    store = open_store(url)
    await store.open()
    try:
        run = await store.read(run_ops.get_run(run_id))
        journal = await store.read(journal_ops.load_journal(run_id))
    finally:
        await store.close()
    assert run is not None
    return run.status, [step.key for step in journal]


def test_read_only__the_worker_stops_says_why_and_another_finishes_the_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cairn.db"
    url = f"sqlite:///{path}"
    effects = tmp_path / "effects.txt"
    with cairn.Client(url) as client:
        run_id = client.start("readonly.three", run_id="ro-1", allow_unknown=True).run_id

    first = _worker(url, effects)
    try:
        _, err = first.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        first.kill()
        _, err = first.communicate()
        pytest.fail(f"the worker kept running on a read-only database: {err[-3000:]}")
    lines = err.strip().splitlines()
    assert first.returncode == 1, lines
    # One clear line (and the last one repeating it), not a flood of retries.
    said = [line for line in lines if "this worker stops" in line]
    assert len(said) == 1, lines
    assert f"database '{path}' is read-only for this process" in said[0], said
    assert "stopped" in lines[-1] and "read-only" in lines[-1], lines
    assert not any("retrying" in line for line in lines), lines

    # Nothing damaged; the step whose commit was refused left nothing behind.
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    status, journal = asyncio.run(_stored(url, run_id))
    assert (status, journal) == ("RUNNING", ["first#1"])

    second = _worker(url, effects)  # the first is gone: its runs are taken at once
    try:
        with cairn.Client(url) as client:
            assert client.get(run_id).result(timeout=DEADLINE) == 6
    finally:
        second.terminate()
        second.communicate(timeout=DEADLINE)
    # The step cut off by the read-only commit ran again; the committed one did not.
    assert _effects(effects) == Counter({"first": 1, "lock_out": 2, "last": 1})


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder, and a read-only bind mount of it (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    source, view = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    bind = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True)
        yield source, view
    finally:
        subprocess.run(["umount", str(view)], check=True)


@pytest.mark.parametrize("open_elsewhere", [False, True])
def test_read_only__a_worker_started_on_a_read_only_mount_says_so_and_exits_1(
    read_only_view: tuple[Path, Path], open_elsewhere: bool
) -> None:
    source, view = read_only_view
    with cairn.Client(f"sqlite:///{source / 'cairn.db'}") as client:
        client.start("readonly.three", run_id="ro-2", allow_unknown=True)
    before = (source / "cairn.db").read_bytes()
    # With another process using the file, its -wal and -shm exist and SQLite opens the
    # file read-only; without, it cannot open it at all.
    holder = sqlite3.connect(source / "cairn.db") if open_elsewhere else None
    try:
        if holder is not None:
            holder.execute("SELECT COUNT(*) FROM runs").fetchone()
        proc = _worker(f"sqlite:///{view / 'cairn.db'}", source / "effects.txt")
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        if holder is not None:
            holder.close()
    last = err.strip().splitlines()[-1]
    assert proc.returncode == 1, err
    assert last.startswith("error: ") and "read-only" in last and str(view) in last, last
    assert (source / "cairn.db").read_bytes() == before
    assert not (source / "effects.txt").exists()
