"""kill -9 during a blob's write and during a prune's sweep: no reference without its blob.

Both stores. A blob is written (temporary file, fsync, rename) before the checkpoint
that names it; the sweep deletes blobs only after the runs naming them are gone. So a
process killed at either point leaves at most unreferenced files, which the next prune
deletes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.blobs import FileBlobs, reference, sweep
from cairn.store import open_store

from .test_cli import TIMEOUT, _env, cairn_cmd
from .test_prune_crash import connect, run_sql

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("blob_flow.py")
OLD = time.time() - 100 * 86400


def blob_names(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*/*") if not p.name.endswith(".tmp")}


def count_files(directory: Path) -> int:
    """How many files the blob directory holds (cheaper than `blob_names`, for polling)."""
    return sum(len(os.listdir(sub)) for sub in os.scandir(directory) if sub.is_dir())


def referenced(url: str) -> set[str]:
    """Every blob hash the database's value columns name."""
    found: set[str] = set()
    with connect(url) as conn:
        for table, column in sweep.VALUE_COLUMNS:
            for (text,) in run_sql(url, conn, f"SELECT {column} FROM {table}"):
                found |= reference.hashes_in(str(text or ""))
    return found


def flow(url: str, blobs: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), url, blobs.as_uri(), "blob-run", *extra],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_blob_crash__killed_mid_write_leaves_no_reference_and_the_run_finishes(
    store_url: str, tmp_path: Path
) -> None:
    blobs = tmp_path / "blobs"
    held = flow(store_url, blobs, "--hold")
    try:
        assert held.stdout is not None
        line = held.stdout.readline()  # blocks until the blob's write is under way
        assert line.strip() == "writing", held.stderr.read() if held.stderr else ""
    finally:
        held.kill()  # SIGKILL inside the write
        held.communicate(timeout=10)
    assert held.returncode == -9
    assert blob_names(blobs) == set()  # no blob under its name: only the temporary file
    assert len(list(blobs.glob("*/*.tmp"))) == 1
    assert referenced(store_url) == set()  # and no checkpoint names it

    again = flow(store_url, blobs)
    out, err = again.communicate(timeout=TIMEOUT)
    assert again.returncode == 0, err
    assert out.strip() == str(8 * 1024 * 1024)
    [name] = blob_names(blobs)
    assert referenced(store_url) == {name}
    data = (blobs / name[:2] / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == name

    async def sweep_now() -> int:
        store = open_store(store_url)
        await store.open()
        try:
            return await sweep.sweep(store, FileBlobs(blobs), grace=0)
        finally:
            await store.close()

    assert asyncio.run(sweep_now()) == 1  # the stray temporary file, not the blob
    assert blob_names(blobs) == {name} and list(blobs.glob("*/*.tmp")) == []


BLOBS = 6000  # enough for the sweep to take a while, so the kill lands inside it
KEPT = 50


def fill(url: str, blobs: Path) -> None:
    """BLOBS old finished runs and KEPT running ones, each naming a blob of its own."""

    async def migrate() -> None:
        store = open_store(url)
        await store.open()
        await store.close()

    asyncio.run(migrate())
    store = FileBlobs(blobs)
    rows = []
    for i in range(BLOBS + KEPT):
        data = f'"value {i}"'.encode()
        ref = reference.of(data, "application/json")
        store.put(ref.sha256, data)
        os.utime(store.path(ref.sha256), (OLD, OLD))
        status = "COMPLETED" if i < BLOBS else "RUNNING"
        rows.append((f"run-{i:05}", status, ref.text(), OLD, OLD, OLD if i < BLOBS else None))
    with connect(url) as conn:
        marks = "?" if url.startswith("sqlite") else "%s"
        conn.cursor().executemany(
            "INSERT INTO runs (run_id, status, args, created_at, updated_at, finished_at, "
            f"workflow) VALUES ({', '.join([marks] * 6)}, 'w')",
            rows,
        )
        if url.startswith("sqlite"):
            conn.commit()


def test_blob_crash__killed_mid_sweep_leaves_no_dangling_reference(
    store_url: str, tmp_path: Path
) -> None:
    blobs = tmp_path / "blobs"
    fill(store_url, blobs)
    total = len(blob_names(blobs))
    assert total == BLOBS + KEPT
    env = {**_env(), "CAIRN_BLOBS": blobs.as_uri()}
    prune = ["runs", "prune", "--older-than", "30d", "--db", store_url]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", *prune],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while count_files(blobs) >= total:  # the sweep has begun deleting
            assert proc.poll() is None, f"prune ended before it was killed: {proc.stderr}"
            assert time.monotonic() < deadline, "prune deleted no blob"
            time.sleep(0.001)
        proc.kill()  # SIGKILL inside the sweep
    finally:
        proc.kill()
        proc.communicate()
    left = blob_names(blobs)
    assert KEPT < len(left) < total, "the kill did not land inside the sweep"
    assert referenced(store_url) <= left  # every reference has its blob

    again = cairn_cmd(tmp_path, "runs", "prune", "--older-than", "30d", "--db", store_url, env=env)
    assert again.returncode == 0, again.stderr
    assert blob_names(blobs) == referenced(store_url)
    assert len(referenced(store_url)) == KEPT
