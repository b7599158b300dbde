"""The workflow every chaos scenario runs: ten steps that log their side effects.

Each step appends a line to its worker's side-effect log (not the store) when it starts
and when it ends. The logs are append-only and ordered by the machine's monotonic clock, so
a test can tell which step of which run started twice, who ran it first, and whether that
first execution was cut off by the fault the test injected. A step's result names the
execution it came from (worker and start time), so the journal tells which one committed.
"""

from __future__ import annotations

import asyncio
import os
import time

import cairn

SIDE_DIR = os.environ.get("CAIRN_SIDE_DIR", "side")
STEP_DELAY = float(os.environ.get("CAIRN_STEP_DELAY", "0"))
# Seconds the marked step blocks the event loop with time.sleep (0: never).
BLOCK_FOR = float(os.environ.get("CAIRN_BLOCK_FOR", "0"))
BLOCK_STEP = 3
# Which worker this is, as the test named it (a pid means nothing across PID namespaces).
WORKER = os.environ.get("CAIRN_WORKER_TAG") or str(os.getpid())
_log_fd: int | None = None


def log_effect(run_id: str, step: int, phase: str) -> int:
    """Append "when run step phase" to this worker's own log.

    One file per worker, opened O_APPEND and written with one write() per line: nothing
    is shared between workers, so a frozen worker holds no lock that another needs. The
    time is CLOCK_MONOTONIC, one clock for the whole machine (PID namespaces included,
    and libfaketime leaves it alone when told to), so lines of all workers order.
    """
    global _log_fd
    if _log_fd is None:
        os.makedirs(SIDE_DIR, exist_ok=True)
        path = os.path.join(SIDE_DIR, f"{WORKER}.log")
        _log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    when = time.monotonic_ns()
    os.write(_log_fd, f"{when} {run_id} {step} {phase}\n".encode())
    return when


@cairn.step(name="chaos_effect")
async def effect(step: int) -> dict[str, int | str]:
    """Its result says which execution it was (worker and start row): the one committed."""
    run_id = cairn.current_run().run_id
    started = log_effect(run_id, step, "start")
    if BLOCK_FOR and step == BLOCK_STEP:
        time.sleep(BLOCK_FOR)  # blocks the event loop on purpose
    if STEP_DELAY:
        await asyncio.sleep(STEP_DELAY)
    log_effect(run_id, step, "end")
    return {"step": step, "by": WORKER, "at": started}


@cairn.workflow(name="chaos.ten")
async def ten_effects(n: int) -> int:
    total = 0
    for step in range(10):
        total += int((await effect(step))["step"])
    return total + n


# A queue whose limit the woken-runs scenario holds to (test_woken_limits.py).
LIMIT = 2
limited_queue = cairn.Queue("chaos_limited", concurrency=LIMIT)
WOKEN_FROM = 5  # the steps from here on run after the sleep: in a woken attempt


@cairn.workflow(name="chaos.limited", queue=limited_queue)
async def limited_effects(n: int) -> int:
    """ten_effects on a queue with a concurrency limit, parked and woken half way."""
    total = 0
    for step in range(10):
        if step == WOKEN_FROM:
            await cairn.sleep(0.2)  # gives its place up, and takes one again when it wakes
        total += int((await effect(step))["step"])
    return total + n
