"""A pause or a cancel reaching a run whose replay waits for a blob store that is away.

The run stands at its wait for "go"; woken, its replay reads a step's large result
first, from a blob store that does not answer (a directory moved away, or moto's S3
server stopped). A pause parks it PAUSED at once: a pause runs no cleanup, and the
resumed run replays. A cancel cannot be met there (API.md §3: the cleanup runs where
the run stands, further on), so it waits for the read, and the run says so. Both
blob stores, both databases. docs/howto/large-values.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import cairn
from cairn.core import blob_reads

from .kit import WAIT, Kit, waits_for_the_blob_store
from .seeds import until
from .test_large_values import blob_dir, engine

BIG = 10_000
PROMPT = 3.0  # seconds: "at once" is well within the 2 s back-off's reach


@dataclass
class Outage:
    """A blob store of the test that can be taken away and brought back."""

    open: Callable[..., cairn.Engine]  # an engine on it: open(**options)
    take: Callable[[], None]
    give: Callable[[], None]
    gone: bool = False

    def away(self) -> None:
        self.take()
        self.gone = True

    def back(self) -> None:
        if self.gone:
            self.give()
            self.gone = False


@pytest.fixture(params=["files", "s3"])
def outage(
    request: pytest.FixtureRequest, kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Outage:
    if request.param == "s3":
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the tests
        moto_s3 = request.getfixturevalue("moto_s3")
        return Outage(
            lambda **options: kit.engine(blobs=moto_s3.url, **options),
            moto_s3.stop,
            moto_s3.start,
        )
    where = blob_dir(kit, tmp_path)
    aside = where.with_name(where.name + ".aside")
    return Outage(
        lambda **options: engine(kit, tmp_path, **options),
        lambda: where.rename(aside),  # as an unmounted filesystem: not there
        lambda: aside.rename(where),
    )


@contextlib.asynccontextmanager
async def replaying_behind(
    kit: Kit, outage: Outage, calls: list[str]
) -> AsyncIterator[tuple[cairn.Engine, cairn.RunHandle]]:
    """An engine, and its run woken while the blob store is away: its replay waits for
    the step's result, behind the history (the run stands at its wait for "go")."""

    @kit.step("interrupts.fetch")
    def fetch() -> str:
        calls.append("fetch")
        return "f" * BIG

    @kit.step("interrupts.release")
    def release() -> str:
        calls.append("cleanup")
        return "released"

    @kit.workflow("interrupts.behind")
    async def flow() -> int:
        text = await fetch()
        try:
            await cairn.wait_for_event("go", timeout="1h")
        finally:
            await release()
        return len(text)

    async with outage.open(inline_limit="1KiB") as eng:
        run = await eng.start(flow, run_id="interrupts-behind")
        await until(eng, run.run_id, "WAITING")
        outage.away()
        try:
            await eng.send_event(run.run_id, "go", None)
            await waits_for_the_blob_store(eng, run.run_id)
            yield eng, run
        finally:
            outage.back()


async def test_blob_read_interrupts__a_pause_parks_a_replay_behind_the_history_at_once(
    kit: Kit, outage: Outage
) -> None:
    calls: list[str] = []
    async with replaying_behind(kit, outage, calls) as (eng, run):
        await run.pause()
        async with asyncio.timeout(PROMPT):  # the blob store is still away
            paused = await until(eng, run.run_id, "PAUSED")
        outage.back()
        await run.resume()
        result = await run.result(timeout=WAIT)
    assert paused.waiting_for is None  # no longer "the blob store: ..."
    assert result == BIG
    assert calls == ["fetch", "cleanup"]  # nothing ran twice, nothing was skipped


async def test_blob_read_interrupts__a_cancel_behind_the_history_waits_for_the_store(
    kit: Kit, outage: Outage
) -> None:
    calls: list[str] = []
    async with replaying_behind(kit, outage, calls) as (eng, run):
        await run.cancel()
        async with asyncio.timeout(WAIT):
            while blob_reads.CANCEL_WAITS not in (
                (await eng.control.record(run.run_id)).waiting_for or ""
            ):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # a few more tries: the cancel still waits
        assert (await eng.control.record(run.run_id)).status == "RUNNING"
        assert calls == ["fetch"]  # its cleanup has not run from the wrong place
        outage.back()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    assert calls == ["fetch", "cleanup"]  # then the cleanup ran, where the run stood
