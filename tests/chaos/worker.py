"""A chaos worker process: one engine serving flow.py until SIGTERM.

    python -m tests.chaos.worker URL --lease 2 --retry-for 2 --concurrency 10

Prints "ready" once its engine is open. PostgreSQL workers get a short `retry_for` so
that an outage outlasts the store's retry window.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from tests.chaos import flow  # noqa: F401  (registers the workflow)

import cairn
from cairn.store import Store, open_store


def build_store(url: str, retry_for: float) -> Store:
    if url.startswith(("postgresql://", "postgres://")):
        from cairn.store.postgres import PostgresStore

        return PostgresStore(url, retry_for=retry_for)
    return open_store(url)


async def serve(url: str, lease: float, retry_for: float, concurrency: int) -> None:
    store = build_store(url, retry_for)
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
