"""A database that drops connections, goes away, comes back or hangs: no step runs twice.

PostgreSQL only: a proxy that loses the replies to committed writes, a private server
(not the shared one other tests use) stopped for longer than the store's retry window,
a proxy that hangs one worker's open connections while new ones pass, and one that
resets every connection again and again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import Chaos, Fault, size
from tests.chaos.pg_cluster import PgCluster
from tests.chaos.proxy import FreezingProxy, LosingProxy

pytestmark = [pytest.mark.process, pytest.mark.timeout(1200)]


@pytest.fixture
def proxy(pg_url: str) -> Iterator[LosingProxy]:
    losing = LosingProxy(("127.0.0.1", 5432), rate=0.05, budget=size(25, 100))
    try:
        yield losing
    finally:
        losing.close()


def test_lost_replies__connections_dropped_right_after_commit_of_each_kind_of_write(
    tmp_path: Path, pg_url: str, proxy: LosingProxy
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    chaos = Chaos(tmp_path, proxy.url(database))
    try:
        run_ids = chaos.enqueue(size(40, 200))  # starts go through the proxy too
        chaos.spawn(concurrency=5, delay=0.02)
        chaos.spawn(concurrency=5, delay=0.02)
        verdict = chaos.verdict(run_ids)
    finally:
        chaos.stop_all()
    print(verdict, dict(proxy.lost))
    assert verdict.duplicates == [], chaos.story(verdict)
    assert sum(proxy.lost.values()) >= size(25, 100) // 2, proxy.lost
    assert {"INSERT", "UPDATE"} <= set(proxy.lost), proxy.lost


def test_outages__postgresql_down_longer_than_the_retry_window_again_and_again(
    tmp_path: Path, cluster: PgCluster
) -> None:
    chaos = Chaos(tmp_path, cluster.url)
    try:
        run_ids = chaos.enqueue(size(30, 120))
        chaos.spawn(concurrency=5, delay=0.2, retry_for=1.0)
        chaos.spawn(concurrency=5, delay=0.2, retry_for=1.0)
        for _ in range(size(3, 12)):
            chaos.wait_effects(len(chaos.rows()) + 10)
            cluster.outage(2.0)  # twice the workers' retry window
        verdict = chaos.verdict(run_ids)
    finally:
        chaos.stop_all()
    print(verdict, f"{cluster.stops} outages")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert cluster.stops == size(3, 12)


def test_frozen_connections__a_worker_whose_connections_hang_lets_its_runs_go(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    # A failover or a hung middlebox, seen from one worker: every connection it had open
    # stops answering (no error, no reply) while new ones get through. Its heartbeat goes
    # on around the proxy, as one whose own connection noticed the dead peer (keepalives,
    # TCP user timeout) and reconnected would: alive, but its runs make no progress.
    # They must go to the healthy worker, and no step whose result was committed may
    # run again: judged by the journal (the hung worker goes on starting steps it can
    # never commit, so the moment of the freeze proves nothing; see journal_verdict).
    database = pg_url.rsplit("/", 1)[1]
    chaos = Chaos(tmp_path, pg_url)
    try:
        run_ids = chaos.enqueue(size(10, 60))
        stuck = chaos.spawn(
            url=freezing.url(database),
            env={"CAIRN_HEARTBEAT_URL": pg_url},
            concurrency=10,
            delay=0.25,
        )
        chaos.wait_effects(size(20, 60), stuck)  # its runs are under way...
        held = _busy(chaos, stuck)  # ...and it is inside steps of some of them
        assert freezing.freeze() > 0
        chaos.faults.append(Fault(chaos.tag(stuck), chaos.mark(), "frozen connections"))
        healthy = chaos.spawn(concurrency=10, delay=0.05)
        verdict = chaos.journal_verdict(run_ids, timeout=size(60, 180))
        freezing.thaw()  # the hung worker's writes land now, late: fenced off
    finally:
        chaos.stop_all()
    print(verdict, f"{len(held)} runs held when frozen")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert chaos.effects_by(healthy) > 0
    log = chaos.log_of(stuck)
    assert "its database work got no reply" in log and "let go of it" in log, log[-3000:]


def test_resets__every_connection_reset_again_and_again(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    # A restarted load balancer or a broken network path: every connection of both
    # workers is reset (RST) mid-run, again and again. Each worker meets an error at once
    # (never a silent connection left to the stall check), reconnects and goes on; no
    # step whose result was committed runs again, and every run completes.
    database = pg_url.rsplit("/", 1)[1]
    chaos = Chaos(tmp_path, freezing.url(database))
    resets = 0
    try:
        # The runs come once both workers are up: the first one, started while the second
        # still imports (seconds on a loaded machine), would otherwise finish them all first.
        workers = [chaos.spawn(concurrency=5, delay=0.02) for _ in range(2)]
        run_ids = chaos.enqueue(size(40, 160))
        # The resets are spread over the runs' effects (two a step): waiting for a fixed
        # number more after each one could wait past the last effect, as two quick
        # workers can outrun the resets.
        total, times = len(run_ids) * 20, size(4, 15)
        for i in range(times):
            spread = total * (i + 1) // (times + 1)
            chaos.wait_effects(min(total, max(len(chaos.rows()) + 1, spread)))
            resets += freezing.reset()
        verdict = chaos.verdict(run_ids)
    finally:
        chaos.stop_all()
    print(verdict, f"{resets} connections reset")
    assert verdict.duplicates == [], chaos.story(verdict)
    assert resets >= size(4, 15)
    for worker in workers:
        log = chaos.log_of(worker)
        assert "lost postgresql" in log or "heartbeat failed" in log, log[-3000:]
        assert "got no reply" not in log, log[-3000:]


def _busy(chaos: Chaos, proc: subprocess.Popen[bytes]) -> set[str]:
    """The runs `proc` is executing a step of, once it executes some."""
    deadline = time.monotonic() + 60
    while not (held := chaos.in_flight(proc)):
        assert time.monotonic() < deadline, f"no step in flight: {chaos.log_of(proc)[-3000:]}"
        time.sleep(0.02)
    return held
