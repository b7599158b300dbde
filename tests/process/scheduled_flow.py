"""A workflow that schedules another without awaiting it, for the kill -9 test.

    python scheduled_flow.py DB EFFECTS [--hold POINT]

The parent calls `schedule_workflow(annual_review, ..., delay="1s")` as pyworkflow's docs
write it (not awaited), then a step, then returns. POINT makes this process stop where
the test kills it:

- ``unrecorded``: the scheduled run is created and the step after the call committed, but
  the start is not journaled (its write is held);
- ``recorded``: the start is journaled and the parent has not finished.

Without POINT the process starts (or finds and recovers) the parent, waits for it and
for the run it scheduled, prints one JSON line and exits 0. The step and each run of
annual_review append a line to EFFECTS (outside the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from cairn import Engine, schedule_workflow, step, workflow
from cairn.store.programs import journal as journal_ops

HOLD = ""
EFFECTS = Path("effects.txt")
PARENT = "sched-parent"


def effect(line: str) -> None:
    """Append a line to the side-effect file and make it durable before going on."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


@workflow(name="sched.annual_review")
async def annual_review(year: int) -> str:
    effect(f"review {year}")
    return f"reviewed {year}"


@step(name="sched.close_books")
async def close_books(year: int) -> str:
    effect(f"books {year}")
    return f"closed {year}"


@workflow(name="sched.yearly")
async def yearly(year: int) -> str:
    schedule_workflow(annual_review, year, delay="1s")
    await close_books(year)  # runs while the start is still being written
    if HOLD == "recorded":
        await asyncio.Event().wait()  # the start is journaled; the parent never ends
    return "scheduled"


def hold_before_record(engine: Engine) -> None:
    """Stop the write that journals a start: the run it created is already stored."""
    store: Any = engine.store
    write = store.write

    async def held(op: Any) -> Any:
        journals = getattr(op, "kind", None) in (journal_ops.record_step, journal_ops.upsert_step)
        if journals and op.args[1].kind == "schedule":
            await asyncio.Event().wait()
        return await write(op)

    store.write = held


async def main() -> int:
    global HOLD, EFFECTS
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("effects")
    parser.add_argument("--hold", default="")
    options = parser.parse_args()
    HOLD, EFFECTS = options.hold, Path(options.effects)
    async with Engine(f"sqlite:///{options.db}", workers=4, lease="30s") as engine:
        if HOLD == "unrecorded":
            hold_before_record(engine)
        parent = await engine.start(yearly, 2026, run_id=PARENT)
        result = await parent.result(timeout=60)
        history = await engine.history(parent.run_id)
        (scheduled,) = [entry.result["run_id"] for entry in history if entry.kind == "schedule"]
        review = await (await engine.get(scheduled)).result(timeout=60)
        runs = [r.run_id for r in await engine.list_runs(workflow="sched.annual_review")]
    print(json.dumps({"result": result, "review": review, "scheduled": scheduled, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
