"""A fluent chain and a Cloudflare-style entrypoint that the seed crash tests kill -9.

    python seed_flows.py DB EFFECTS KIND [--hold POINT] [--run-id ID]

KIND is ``fluent`` or ``entrypoint``: three stages, each appending ``KIND stage N`` to
EFFECTS (a file outside the store, fsynced) before returning. POINT makes this process
stop where the test kills it:

- ``in:N``: stage N has written its line but not returned, so nothing of it is committed;
- ``after:N``: stage N is committed and the workflow waits before stage N+1.

Without POINT the process starts (or, with an existing run id, finds and recovers) the
run, prints one JSON line with its result, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import cairn

HOLD = ""
EFFECTS = Path("effects.txt")


def effect(line: str) -> None:
    """Append a line to the side-effect file and make it durable before going on."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


def stage(kind: str, n: int, value: str) -> str:
    """Stage n's side effect, then its result; holds inside the stage for `in:N`."""
    effect(f"{kind} stage {n}")
    if HOLD == f"in:{n}":
        threading.Event().wait()  # the side effect happened; the commit never will
    return f"{value}>{n}"


async def hold_after(n: int) -> None:
    if HOLD == f"after:{n}":
        await asyncio.Event().wait()  # stage n is committed; stage n+1 never starts


# The fluent chain: three stages, a branch between the second and the third.
def fetch(order: str) -> str:
    return stage("fluent", 1, order)


def charge(order: str) -> str:
    return stage("fluent", 2, order)


async def charged(order: str) -> bool:
    await hold_after(2)
    return order.endswith(">2")


class Ship(cairn.Step):
    def execute(self, order: str) -> str:
        return stage("fluent", 3, order)


letters = (
    cairn.Workflow("seed.fluent")
    .then(cairn.Step("fetch", fetch))
    .then(cairn.Step("charge", charge, options={"max_attempts": 3}))
    .branch(charged, then=Ship(), otherwise=None)
)


# The Cloudflare-style entrypoint: the same three stages.
class ShipFlow(cairn.WorkflowEntrypoint):
    name = "seed.entrypoint"

    async def run(self, event: Any, step: Any) -> str:
        @step.do("fetch")
        def fetch() -> str:
            return stage("entrypoint", 1, event.payload)

        @step.do("charge", config={"retries": {"limit": 2, "delay": "1 second"}})
        def charge(fetch: str) -> str:
            return stage("entrypoint", 2, fetch)

        @step.do("ship")
        def ship(charge: str) -> str:
            return stage("entrypoint", 3, charge)

        await charge()
        await hold_after(2)
        return str(await ship())


async def main() -> int:
    global HOLD, EFFECTS
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("effects")
    parser.add_argument("kind", choices=["fluent", "entrypoint"])
    parser.add_argument("--hold", default="")
    parser.add_argument("--run-id", default="seed-run")
    options = parser.parse_args()
    HOLD, EFFECTS = options.hold, Path(options.effects)
    workflow: Any = letters if options.kind == "fluent" else ShipFlow
    async with cairn.Engine(f"sqlite:///{options.db}", workers=4, lease="30s") as engine:
        handle = await engine.start(workflow, "o", run_id=options.run_id)
        result = await handle.result(timeout=60)
        keys = [entry.key for entry in await engine.history(handle.run_id)]
    print(json.dumps({"result": result, "keys": keys}))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
