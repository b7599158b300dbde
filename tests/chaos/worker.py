"""A chaos worker process: one engine serving flow.py until SIGTERM.

    python -m tests.chaos.worker URL --lease 2 --retry-for 2 --concurrency 10

Prints "ready" once its engine is open. PostgreSQL workers get a short `retry_for` so
that an outage outlasts the store's retry window. CAIRN_HEARTBEAT_URL, if set, is where
the heartbeat connects instead of the URL (around a proxy).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from tests.chaos import flow  # noqa: F401  (registers the workflow)

import cairn
from cairn.store import Store, open_store


def build_store(url: str, retry_for: float, heartbeat_url: str | None) -> Store:
    if url.startswith(("postgresql://", "postgres://")):
        from cairn.store.postgres.side_channel import PostgresSideChannel
        from cairn.store.postgres.store import PostgresStore, conninfo

        class ChaosStore(PostgresStore):
            def side_channel(self) -> PostgresSideChannel:
                if heartbeat_url is None:
                    return super().side_channel()
                # Heartbeats around the fault: see test_database_faults (frozen connections).
                return PostgresSideChannel(conninfo(heartbeat_url), where=self.where)

        return ChaosStore(url, retry_for=retry_for)
    return open_store(url)


async def serve(url: str, lease: float, retry_for: float, concurrency: int) -> None:
    store = build_store(url, retry_for, os.environ.get("CAIRN_HEARTBEAT_URL"))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with cairn.Engine(
            url, store=store, workers=concurrency, lease=lease, poll_interval=0.05
        ):
            print("ready", flush=True)
            await stop.wait()
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--retry-for", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=10)
    ns = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(serve(ns.url, ns.lease, ns.retry_for, ns.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
