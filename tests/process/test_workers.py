"""Several `cairn worker` processes on one database: each run executes once, kill -9 of a
worker hands its runs to the others, and no completed step runs again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
# Runs each worker executes at once on the shared PostgreSQL server. A worker's pool grows
# with them, to 10 connections plus LISTEN and its heartbeat's: at 20 runs three workers
# held 34 connections of the server's 100, which other test sessions share (clients were
# refused). Three workers at 4 runs each still race for every claim.
SHARED_SERVER_CONCURRENCY = 4


def _worker(
    url: str, side_db: Path, *, delay: float = 0.0, concurrency: int = SHARED_SERVER_CONCURRENCY
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CAIRN_SIDE_DB": str(side_db),
        "CAIRN_STEP_DELAY": str(delay),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}",
    }
    log = side_db.with_name(f"worker-{time.monotonic_ns()}.log")
    with open(log, "wb") as stderr:  # the child keeps its own descriptor
        return _popen(env, url, concurrency, stderr)


def _popen(
    env: dict[str, str], url: str, concurrency: int, stderr: object
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn",
            "worker",
            "--db",
            url,
            "-m",
            "tests.process.side_effect_flow",
            "--concurrency",
            str(concurrency),
            "--lease",
            "2s",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,  # type: ignore[arg-type]
    )


def _enqueue(url: str, count: int) -> list[str]:
    from tests.process import side_effect_flow

    with cairn.Client(url) as client:
        return [client.start(side_effect_flow.ten_effects, i).run_id for i in range(count)]


def _wait_all_done(url: str, run_ids: list[str], timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    with cairn.Client(url) as client:
        while True:
            statuses = {r: client.get(r).status().value for r in run_ids}
            if all(s in ("COMPLETED", "FAILED", "CANCELLED") for s in statuses.values()):
                return statuses
            if time.monotonic() > deadline:
                pending = [r for r, s in statuses.items() if s != "COMPLETED"]
                raise AssertionError(f"{len(pending)} runs unfinished: {pending[:5]}")
            time.sleep(0.2)


def _effects(side_db: Path) -> tuple[set[tuple[str, int]], list[tuple[str, int, int, int]]]:
    conn = sqlite3.connect(side_db)
    try:
        done = {(r, s) for r, s in conn.execute("SELECT run_id, step FROM effects")}
        dups = list(conn.execute("SELECT run_id, step, first_pid, second_pid FROM duplicates"))
    finally:
        conn.close()
    return done, dups


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            # Seen once in CI (after which test is unknown): a worker still running 15 s
            # after SIGTERM. Reap it, or its Popen warns when collected in a later test.
            proc.kill()
            proc.wait()


def _worker_count(store_url: str) -> int:
    return 3 if store_url.startswith("postgres") else 2


def test_workers__every_step_of_every_run_once(
    store_url: str, tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    side = tmp_path / "side.db"
    run_ids = _enqueue(store_url, 300)
    for _ in range(_worker_count(store_url)):
        workers.append(_worker(store_url, side))
    statuses = _wait_all_done(store_url, run_ids, timeout=240)
    assert set(statuses.values()) == {"COMPLETED"}
    done, dups = _effects(side)
    assert dups == []
    assert done == {(r, s) for r in run_ids for s in range(10)}


def test_workers__kill_9_hands_runs_to_the_others(
    store_url: str, tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    side = tmp_path / "side.db"
    run_ids = _enqueue(store_url, 60)
    for _ in range(_worker_count(store_url)):
        workers.append(_worker(store_url, side, delay=0.05))
    victim = workers[0]
    # Kill once the victim has done real work (its effects are in the side table).
    deadline = time.monotonic() + 60
    while True:
        conn = sqlite3.connect(side)
        try:
            mine = (
                conn.execute(
                    "SELECT COUNT(*) FROM effects WHERE pid = ?", (victim.pid,)
                ).fetchone()[0]
                if _has_table(conn)
                else 0
            )
        finally:
            conn.close()
        if mine >= 5:
            break
        assert time.monotonic() < deadline, "the first worker never executed a step"
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    statuses = _wait_all_done(store_url, run_ids, timeout=240)
    assert set(statuses.values()) == {"COMPLETED"}
    done, dups = _effects(side)
    assert done == {(r, s) for r in run_ids for s in range(10)}
    # Only a step in flight on the killed worker may run again, at most one per run.
    assert all(first == victim.pid for _, _, first, _ in dups), dups
    assert len({r for r, *_ in dups}) == len(dups), dups


def _has_table(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'effects'").fetchone()
    return row is not None


def test_workers__postgres_restart_mid_load_loses_nothing(
    tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    # A private server: restarting the shared one on 5432 would fail every other test
    # (and every other session) using it at that moment.
    from tests.chaos.pg_cluster import private_cluster

    cluster = private_cluster()
    try:
        url = cluster.url
        side = tmp_path / "side.db"
        run_ids = _enqueue(url, 90)
        for _ in range(3):
            workers.append(_worker(url, side, delay=0.05, concurrency=10))
        _wait_for_effects(side, 40)
        cluster.stop("fast")
        cluster.start()
        statuses = _wait_all_done(url, run_ids, timeout=300)
        assert set(statuses.values()) == {"COMPLETED"}
        done, dups = _effects(side)
        assert done == {(r, s) for r in run_ids for s in range(10)}
        # A step whose commit the restart cut off may run again, but never one that
        # committed: at most the steps in flight at the restart (30 slots), each at most
        # once more.
        print(f"restart: {len(dups)} step(s) re-ran after PostgreSQL restarted mid-load")
        assert len(dups) <= 30, dups
        assert len({(r, s) for r, s, *_ in dups}) == len(dups), dups
    finally:
        for worker in workers:
            worker.kill()
        cluster.destroy()


def _wait_for_effects(side: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        if side.exists():
            conn = sqlite3.connect(side)
            try:
                n = (
                    conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
                    if _has_table(conn)
                    else 0
                )
            finally:
                conn.close()
            if n >= count:
                return
        assert time.monotonic() < deadline, "workers did no work"
        time.sleep(0.05)
