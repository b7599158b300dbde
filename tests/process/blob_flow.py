"""A workflow whose step returns a value over inline_limit, run in a real process.

    python blob_flow.py URL BLOBS RUN_ID [--hold]

With --hold the process stops inside the blob's write (its temporary file is written
and about to be fsynced) and prints "writing", for the test to kill it there. Without,
it starts (or recovers) run RUN_ID and prints its result: the length of the value.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import cairn

SIZE = 8 * 1024 * 1024


@cairn.step("blob.produce")
def produce(n: int) -> str:
    return "b" * n


@cairn.workflow("blob.flow")
async def flow(n: int) -> int:
    return len(await produce(n))


def hold_in_blob_writes() -> None:
    """Make every fsync of a blob's temporary file wait for ever (after saying so)."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            print("writing", flush=True)
            threading.Event().wait()
        real(fd)

    os.fsync = fsync


async def main(url: str, blobs: str, run_id: str) -> None:
    async with cairn.Engine(url, blobs=blobs, lease="1s", poll_interval=0.05) as engine:
        try:
            run = await engine.get(run_id)
        except cairn.RunNotFound:
            run = await engine.start(flow, SIZE, run_id=run_id)
        print(await run.result(timeout=60), flush=True)


if __name__ == "__main__":
    if "--hold" in sys.argv:
        hold_in_blob_writes()
    asyncio.run(main(*sys.argv[1:4]))
