"""A database that drops connections, goes away and comes back: no step runs twice.

PostgreSQL only: a proxy that loses the replies to committed writes, and a private server
(not the shared one other tests use) stopped for longer than the store's retry window.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import Chaos, size
from tests.chaos.pg_cluster import PgCluster
from tests.chaos.proxy import LosingProxy

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
