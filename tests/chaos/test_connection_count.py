"""Connections a PostgreSQL worker holds stay bounded by its pool across resets.

An operator counting pg_stat_activity saw 13 connections for two workers and a dashboard,
then 30 after three restarts of the server, and asked whether connections leak across
outages. They do not: a worker's pool grows under load up to its `max_connections`
(10), outage or not, and each lost connection is replaced, not kept. This scenario resets
every connection of a loaded worker again and again and counts both ends: the server's
backends for it, and the sockets the process holds (a connection lost but never closed
on the client side would show there). See docs/explanation/storage-and-leases.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest
from tests.chaos.harness import Chaos, size
from tests.chaos.proxy import FreezingProxy

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]

# The pool's max_connections, LISTEN, the heartbeat, and a stall check in progress.
BOUND = 10 + 1 + 1 + 1
# asyncio's self-pipe: a socket pair every process has.
OWN_SOCKETS = 2


def _backends(pg_url: str, proxy: FreezingProxy) -> int:
    """The server's backends for the connections that pass through `proxy` now."""
    ports = set(proxy.server_ports())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT client_port FROM pg_stat_activity").fetchall()
    return sum(1 for (port,) in rows if port in ports)


def _sockets(pid: int) -> int:
    fds = f"/proc/{pid}/fd"
    return sum(1 for fd in os.listdir(fds) if os.readlink(f"{fds}/{fd}").startswith("socket:"))


def test_connections__bounded_by_the_pool_across_resets(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    chaos = Chaos(tmp_path, pg_url)
    counts: list[tuple[int, int]] = []
    resets = 0
    try:
        worker = chaos.spawn(concurrency=10, delay=0.02, url=freezing.url(database))
        for _ in range(size(4, 10)):
            run_ids = chaos.enqueue(30)
            chaos.wait_effects(len(chaos.rows()) + 40)
            resets += freezing.reset()
            chaos.wait_done(run_ids)
            counts.append((_backends(pg_url, freezing), _sockets(worker.pid)))
    finally:
        chaos.stop_all()
    print(f"{resets} connections reset; (backends, sockets) after each reset: {counts}")
    assert resets >= size(4, 10) * 3  # each reset met the worker's connections
    for backends, sockets in counts:
        assert 3 <= backends <= BOUND, counts
        assert sockets <= BOUND + OWN_SOCKETS, counts
