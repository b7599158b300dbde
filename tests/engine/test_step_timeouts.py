"""Step timeouts of sync steps: a timed-out thread runs on, and the next attempt waits for it;
a step with isolation="process" runs in a child process, killed at its timeout. Both where
the run executes and on a step queue's worker (`queue=`).

On both stores, on real time (a thread's sleep cannot be moved by a virtual clock).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

import cairn

from .kit import WAIT, Kit


@pytest.mark.parametrize("queue", [None, "gpu"], ids=["local", "step-queue"])
async def test_sync_timeout__attempts_never_overlap(
    kit: Kit, tmp_path: Path, queue: str | None
) -> None:
    log = tmp_path / "writes.txt"

    @kit.step("slow.write", retries=2, timeout=1, queue=queue)
    def slow_write() -> None:
        began = time.time()
        time.sleep(2)  # past the timeout: a thread cannot be stopped, it runs on
        with log.open("a") as out:
            out.write(f"{began} {time.time()}\n")

    @kit.workflow("timeouts.overlap")
    async def overlap() -> str:
        try:
            await slow_write()
        except cairn.StepTimeout as exc:
            return exc.error_type
        return "no timeout"

    # Two slots on the queue's worker: a retry could be claimed beside the running thread.
    async with kit.engine(step_queues=[queue] if queue else None, workers=2) as engine:
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


class Unavailable(Exception):
    """An error of a step run in its own process, with an attribute of its own."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


@cairn.step(name="isolated.where", timeout=60, isolation="process")
def isolated_where(value: int) -> dict[str, int]:
    return {"pid": os.getpid(), "twice": value * 2}


@cairn.step(name="isolated.fails", retries=1, timeout=60, isolation="process")
def isolated_fails() -> None:
    raise Unavailable("still down", code=503)


@cairn.step(name="isolated.takes", retries=3, timeout=60, isolation="process")
def isolated_takes(value: object) -> None:
    pass


# The timeout counts the child's start (a fresh interpreter importing this module): well
# under a second on an idle machine, over ten seconds measured on 2 cores at load 10+. So
# the stubborn step's timeout is generous: its first attempt must reach its body to show
# a SIGTERM-ignoring process killed. An attempt timed out while its interpreter still
# started records no pid, and the one after it tries again (retries=3).
STUBBORN_TIMEOUT = 20


@cairn.step(name="isolated.stubborn", retries=3, timeout=STUBBORN_TIMEOUT, isolation="process")
def isolated_stubborn(pids: str) -> list[int]:
    """Hang past the timeout, SIGTERM ignored; once an earlier attempt has: report its
    processes still present (alive or not yet reaped), which should be none."""
    recorded = Path(pids)
    earlier = [int(line) for line in recorded.read_text().split()] if recorded.exists() else []
    if earlier:
        return [pid for pid in earlier if _present(pid)]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
    with recorded.open("a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(120)
    return []


@cairn.step(
    name="isolated.queued", retries=3, timeout=STUBBORN_TIMEOUT, isolation="process", queue="gpu"
)
def isolated_queued(pids: str) -> list[int]:
    return isolated_stubborn.fn(pids)


def _present(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # succeeds for a zombie too: a process not yet reaped
    except ProcessLookupError:
        return False
    return True


async def test_isolation_process__result_and_errors_come_back(kit: Kit) -> None:
    @kit.workflow("isolation.back")
    async def back() -> dict[str, object]:
        facts: dict[str, object] = {"where": await isolated_where(21)}
        try:
            await isolated_fails()
        except Unavailable as exc:
            facts["caught"] = [str(exc), exc.code, "Unavailable: still down" in exc.traceback]  # type: ignore[attr-defined]
        try:
            await isolated_takes(lambda: None)  # cannot be pickled: refused at once
        except cairn.StepFailed as exc:
            facts["refused"] = [exc.attempts, exc.error_type, exc.message]
        return facts

    async with kit.engine() as engine:
        facts = await (await engine.start(back)).result(timeout=WAIT * 6)
    where = facts["where"]
    assert isinstance(where, dict) and where["twice"] == 42 and where["pid"] != os.getpid()
    assert facts["caught"] == ["still down", 503, True]
    attempts, error_type, message = facts["refused"]  # type: ignore[misc]
    assert (attempts, error_type) == (1, "cairn.errors.InvalidArguments")
    assert message.startswith("step 'isolated.takes' (isolation='process'): cannot start its")


@pytest.mark.timeout((STUBBORN_TIMEOUT + WAIT) * 3 + 60)  # three slow starts at the most
@pytest.mark.parametrize("queue", [None, "gpu"], ids=["local", "step-queue"])
async def test_isolation_process__a_timed_out_attempt_is_killed(
    kit: Kit, tmp_path: Path, queue: str | None
) -> None:
    pids = tmp_path / "pids.txt"
    step = isolated_queued if queue else isolated_stubborn
    kit.registry.add_step(step)  # for the queue's worker, which finds the step by name

    @kit.workflow("isolation.killed")
    async def killed() -> list[int]:
        return await step(str(pids))

    async with kit.engine(step_queues=[queue] if queue else None) as engine:
        run = await engine.start(killed)
        # Checked by the retry, in its own process: no earlier attempt's process is left.
        assert await run.result(timeout=(STUBBORN_TIMEOUT + WAIT) * 3) == []
        attempts = await engine.control.attempts(run.run_id)
    started = pids.read_text().split()
    assert len(started) == 1  # the one attempt that reached its body, killed at the timeout
    messages = [a["message"] for a in attempts]
    assert messages  # each failed attempt timed out (one may have timed out while starting)
    for message in messages:
        assert re.match(
            rf"step 'isolated\.(stubborn|queued)' attempt \d+ timed out after {STUBBORN_TIMEOUT}s",
            message,
        ), message


def test_isolation_process__refused_where_it_cannot_apply() -> None:
    def local() -> None:
        pass

    async def coroutine() -> None:
        pass

    with pytest.raises(ValueError, match=r"step 'iso\.local': isolation='process' needs a "):
        cairn.step(name="iso.local", isolation="process")(local)
    with pytest.raises(ValueError, match=r"step 'iso\.async': isolation='process' runs a plain"):
        cairn.step(name="iso.async", isolation="process")(coroutine)
    with pytest.raises(ValueError, match=r"isolation of step 'iso\.bad' must be 'thread' or "):
        cairn.step(name="iso.bad", isolation="processes")(local)
    with pytest.raises(ValueError, match=r"step 'Charge': isolation='process' needs a module"):

        class Charge(cairn.Step):
            isolation = "process"

            def execute(self) -> None:
                pass

        Charge()
