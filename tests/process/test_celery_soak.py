"""A Celery soak: 140 runs in flight (plain runs, parents with children on a queue that runs
two at once, runs that continue as new, runs paused and resumed, parents cancelled) while
the broker connections are reset, filled with junk and frozen for longer than the lease,
and a worker is killed (SIGKILL). Faults go through a TCP proxy (tests/chaos/proxy.py).

Proved: every run ends as it should (none lost or stuck), no step completed twice (a step
cut off by the kill may run again: at least once), the children's limit held, and the
workers that were not killed survive every fault.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.proxy import FreezingProxy
from tests.process import celery_procs
from tests.process.celery_procs import CeleryWorker, broker_port, proxied, results, until

import cairn
from cairn.client import ClientRunHandle
from cairn.models import RunStatus

pytestmark = [pytest.mark.process, celery_procs.ONE_AT_A_TIME]

broker = celery_procs.broker
procs = celery_procs.procs
own_queue = celery_procs.own_queue

FLOWS = ("-m", "tests.process.celery_soak_flow")


@pytest.fixture
def proxy(broker: str) -> Iterator[FreezingProxy]:
    between = FreezingProxy(("127.0.0.1", broker_port(broker)))
    try:
        yield between
    finally:
        between.close()


def _lines(root: Path) -> list[tuple[str, str, int]]:
    """The effects file as (what, key, pid)."""
    path = root / "effects.txt"
    found = []
    for line in path.read_text().splitlines() if path.exists() else ():
        text, pid = line.rsplit(" pid=", 1)
        what, key = text.split(" ", 1)
        found.append((what, key, int(pid)))
    return found


def _seen(root: Path) -> set[str]:
    return {f"{what} {key}" for what, key, _ in _lines(root)}


def _most_at_once(lines: list[tuple[str, str, int]]) -> int:
    """How many children's steps were in flight at once ("killed" ends the killed pid's)."""
    open_: dict[str, int] = {}
    most = 0
    for what, key, pid in lines:
        if what == "in":
            open_[key] = pid
        elif what == "out":
            open_.pop(key, None)
        elif what == "killed":
            open_ = {k: p for k, p in open_.items() if p != pid}
        most = max(most, len(open_))
    return most


def test_celery__runs_children_and_limits_survive_broker_faults_and_a_kill(
    sqlite_url: str,
    broker: str,
    proxy: FreezingProxy,
    tmp_path: Path,
    procs: list[CeleryWorker],
    own_queue: str,
) -> None:
    via = proxied(broker, proxy.port)
    env = {"CAIRN_SOAK_QUEUE": own_queue, "CAIRN_BROKER_TIMEOUT": "3"}
    queues = ("--queue", own_queue, "--queue", f"{own_queue}.kids")

    def worker(name: str) -> CeleryWorker:
        started = CeleryWorker(
            sqlite_url, via, tmp_path, name, *FLOWS, "--concurrency", "8", *queues, env=env
        )
        procs.append(started)
        return started

    first, doomed = worker("first"), worker("doomed")
    first.ready(), doomed.ready()
    q = own_queue
    with cairn.Client(sqlite_url) as client:

        def start(name: str, *args: object) -> ClientRunHandle:
            return client.start(name, *args, queue=q, allow_unknown=True)

        parents = [start("soak.parent", n) for n in range(10)]
        paused = [start("soak.steps", 100 + n, 8, 0.5) for n in range(5)]
        plain = [start("soak.steps", n) for n in range(100)]
        chains = [start("soak.rounds", n, 0, 3) for n in range(6)]
        # Paused once a Celery worker holds them (a step done), resumed after the faults.
        until(
            "runs to pause", lambda: {f"end steps {100 + n}.0" for n in range(5)} <= _seen(tmp_path)
        )
        pausing = [handle.pause() for handle in paused]
        # Parents 0-2 are cancelled once their children run (two at a time: the others wait).
        until("children running", lambda: sum(k.startswith("in kid") for k in _seen(tmp_path)) >= 2)
        assert proxy.reset() > 0
        cancelled = parents[:3]
        for handle in cancelled:
            handle.cancel()
        time.sleep(1.0)
        assert proxy.garble() > 0
        time.sleep(1.0)
        proxy.freeze(new=True)  # longer than the lease (2 s) and the broker timeout (3 s)
        time.sleep(3.0)
        doomed.proc.kill()  # SIGKILL, with runs in flight and the broker frozen
        with (tmp_path / "effects.txt").open("a") as out:
            out.write(f"killed - pid={doomed.proc.pid}\n")
        doomed.close()
        time.sleep(7.0)
        proxy.restore()  # the frozen connections stay hung: the workers must drop them
        assert [h.status() for h in paused] == [RunStatus.PAUSED] * 5, pausing
        for handle in paused:
            handle.resume()
        late = worker("late")
        late.ready()
        alive = [first, late]
        assert results(plain, alive, deadline=120) == list(range(100))
        assert results(paused, alive) == [100 + n for n in range(5)]
        assert results(chains, alive) == list(range(6))
        assert results(parents[3:], alive) == [[f"{n}.{i}" for i in range(3)] for n in range(3, 10)]
        for handle in cancelled:
            until("the cancel", lambda h=handle: h.status().finished, deadline=30)
            assert handle.status() == RunStatus.CANCELLED
        runs = client.list_runs(limit=1000).runs
        assert not [r for r in runs if not r.status.finished]  # none lost or stuck
        kids = Counter(r.status for r in runs if r.workflow == "soak.kid")
        # Every parent started its three; a child of a cancelled parent may have ended first.
        assert sum(kids.values()) == 30 and kids[RunStatus.CANCELLED] > 0, kids
    lines = _lines(tmp_path)
    ends = Counter(key for what, key, _ in lines if what == "end")
    by_killed = {key for what, key, pid in lines if what == "end" and pid == doomed.proc.pid}
    twice = {key for key, count in ends.items() if count > 1 and key not in by_killed}
    assert not twice, twice
    assert _most_at_once(lines) <= 2
    for survivor in alive:
        survivor.alive()
        # An operator's log: one line per problem, no traceback per message or retry.
        log = survivor.log.read_text()
        assert "Traceback" not in log, log[-3000:]
