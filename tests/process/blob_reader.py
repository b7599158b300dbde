"""A worker process for tests/process/test_blob_read_cancel.py: reads an offloaded payload.

    python blob_reader.py URL BLOBS

Serves 'blobread.taken' until killed; prints "ready" once its engine is open, and
"cleanup" when the workflow's cleanup step runs.
"""

from __future__ import annotations

import asyncio
import sys

import cairn


@cairn.step("blobread.cleanup")
def cleanup() -> str:
    print("cleanup", flush=True)
    return "done"


@cairn.workflow("blobread.taken")
async def taken() -> int:
    await cairn.wait_for_event("go", timeout="1h")
    try:
        payload = await cairn.wait_for_event("data", timeout="1h")
    except cairn.Cancelled:
        await cleanup()
        raise
    return len(payload)


async def main(url: str, blobs: str) -> None:
    async with cairn.Engine(url, blobs=blobs, inline_limit="1KiB", lease="1s", poll_interval=0.05):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
