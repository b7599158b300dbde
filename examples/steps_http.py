"""Call an HTTP API from a workflow: ``python examples/steps_http.py [URL]``.

``http.request`` is a durable step: connection errors, 429 and 5xx are retried (after
the server's ``Retry-After``), every attempt carries the same ``Idempotency-Key``, and
the answer is recorded in the run's history, so a replay never calls the API again.
"""

from __future__ import annotations

import asyncio
import sys

import cairn
from cairn.steps import http


@cairn.workflow
async def check_site(url: str) -> str:
    response = await http.request("GET", url, timeout_ms=5000)
    return f"{url} answered {response.status} with {response.size} bytes"


async def main(url: str) -> None:
    async with cairn.Engine("sqlite:///steps-http.db") as engine:
        run = await engine.start(check_site, url)
        print(await run.result())
        for entry in await engine.history(run.run_id):
            print(f"  {entry.name}: {entry.status} after {entry.attempts} attempt(s)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "https://example.com/"))
