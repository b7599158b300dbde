"""Many runs, workers killed at random, and (PostgreSQL) the server restarted mid-load.

`make chaos` runs the sizes of the issue (1,000 runs, 20 kill -9); `make test` runs a
smaller load through the same code.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from tests.chaos.harness import Chaos, size
from tests.chaos.pg_cluster import PgCluster

pytestmark = [pytest.mark.process, pytest.mark.timeout(1800)]

WORKERS = 3


def _kill_at_random(chaos: Chaos, run_ids: list[str], kills: int, restart: object) -> None:
    """Kill a random live worker `kills` times (each one replaced), spread over the load."""
    pick = random.Random(7)
    expected = len(run_ids) * 20  # a start and an end line per step
    for n in range(kills):
        chaos.wait_effects(expected * (n + 1) // (kills + 2))
        live = [p for p in chaos.procs if p.poll() is None]
        chaos.kill(pick.choice(live))
        chaos.spawn(concurrency=10, delay=0.01)
        if callable(restart) and n == kills // 2:
            restart()
    time.sleep(0.1)


def _scenario(chaos: Chaos, restart: object = None) -> None:
    run_ids = chaos.enqueue(size(200, 1000))
    for _ in range(WORKERS):
        chaos.spawn(concurrency=10, delay=0.01)
    kills = size(5, 20)
    _kill_at_random(chaos, run_ids, kills, restart)
    verdict = chaos.verdict(run_ids, timeout=1200)
    print(verdict, f"{kills} kill -9")
    assert verdict.duplicates == [], chaos.story(verdict)
    # Only steps in flight on a killed worker ran again: at most its slots per kill.
    assert verdict.excused <= kills * 10


def test_scale__many_runs_with_kill_9_on_sqlite(tmp_path: Path, sqlite_url: str) -> None:
    chaos = Chaos(tmp_path, sqlite_url)
    try:
        _scenario(chaos)
    finally:
        chaos.stop_all()


def test_scale__many_runs_with_kill_9_and_a_restart_on_postgresql(
    tmp_path: Path, cluster: PgCluster
) -> None:
    chaos = Chaos(tmp_path, cluster.url)

    def restart() -> None:
        cluster.stop("fast")
        cluster.start()

    try:
        _scenario(chaos, restart)
    finally:
        chaos.stop_all()
    assert cluster.stops == 1
