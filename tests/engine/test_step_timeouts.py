"""Step timeouts of sync steps: a timed-out thread runs on, and the next attempt waits for it.

On both stores, on real time (a thread's sleep cannot be moved by a virtual clock).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path

import cairn

from .kit import WAIT, Kit


async def test_sync_timeout__attempts_never_overlap(kit: Kit, tmp_path: Path) -> None:
    log = tmp_path / "writes.txt"

    @kit.step("slow.write", retries=2, timeout=1)
    def slow_write() -> None:
        began = time.time()
        time.sleep(3)  # past the timeout: a thread cannot be stopped, it runs on
        with log.open("a") as out:
            out.write(f"{began} {time.time()}\n")

    @kit.workflow("timeouts.overlap")
    async def overlap() -> str:
        try:
            await slow_write()
        except cairn.StepTimeout as exc:
            return exc.error_type
        return "no timeout"

    async with kit.engine() as engine:
        run = await engine.start(overlap)
        assert await run.result(timeout=WAIT + 10) == "cairn.errors.StepTimeout"
        attempts = await engine.control.attempts(run.run_id)
    writes = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(writes) == 2  # both attempts ran to their end...
    (_, first_end), (second_start, _) = writes
    assert first_end <= second_start  # ...one after the other
    messages = [a["message"] for a in attempts]
    assert len(messages) == 2
    for number, message in enumerate(messages, 1):
        pattern = (
            rf"step 'slow\.write' attempt {number} timed out after 1s"
            r" and was still running for (\d+\.\d)s"
        )
        found = re.fullmatch(pattern, message)
        assert found is not None, message
        assert float(found.group(1)) > 0


async def test_sync_timeout__closing_does_not_wait_past_its_grace(kit: Kit) -> None:
    # The thread of a timed-out attempt that never returns holds its run's next attempt,
    # not the worker's close: the grace applies, then the run is handed back.
    started, release = threading.Event(), threading.Event()

    @kit.step("stuck", retries=2, timeout=0.1)
    def stuck() -> None:
        started.set()
        release.wait(WAIT * 3)

    @kit.workflow("timeouts.close")
    async def close() -> None:
        await stuck()

    try:
        engine = kit.engine(grace=0.5)
        await engine.open()
        run = await engine.start(close)
        await asyncio.to_thread(started.wait, WAIT)
        await asyncio.sleep(0.3)  # past the timeout: waiting for the thread now
        async with asyncio.timeout(WAIT):
            await engine.close()
        async with kit.engine(workers=0) as reader:
            record = await reader.control.record(run.run_id)
    finally:
        release.set()
    assert record.status == "PENDING"  # handed back, for a worker to take
