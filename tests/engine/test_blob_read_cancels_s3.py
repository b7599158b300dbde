"""A cancel asked while a run waits for a bucket away to give back a value, against moto.

Where the run stands (a value just taken, its arguments before its code began), the
cancel is delivered at once: the run ends CANCELLED while the bucket is still away, its
cleanup run, and what it took kept in its history. Before the replay has caught up with
the history, the cancel waits for the read (the cleanup must run where the run stands),
and the run says so: tests/engine/test_blob_read_interrupts.py, with a pause. Both stores.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import cairn
from cairn.core import blob_reads
from cairn.representation import words

from .kit import Kit
from .moto_server import MotoS3
from .seeds import until
from .test_blob_read_paths_s3 import BIG, waits_for_the_bucket

PROMPT = 3.0  # seconds: a cancel "at once" is well within the 2 s back-off's reach


@pytest.fixture(autouse=True)
def _one_try(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the tests


async def test_blob_read_cancels__a_value_just_taken_ends_cancelled_at_once(
    kit: Kit, moto_s3: MotoS3
) -> None:
    cleaned: list[str] = []

    @kit.step("cancels.cleanup")
    def cleanup() -> str:
        cleaned.append("x")
        return "done"

    @kit.workflow("cancels.taken")
    async def taken() -> int:
        await cairn.wait_for_event("go", timeout="1h")
        try:
            payload = await cairn.wait_for_event("data", timeout="1h")
        except cairn.Cancelled:
            await cleanup()
            raise
        return len(payload)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(taken, run_id="cancels-taken")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "d" * BIG)  # queued: it waits for "go"
        moto_s3.stop()
        try:
            await eng.send_event(run.run_id, "go", None)
            await waits_for_the_bucket(eng, run.run_id)
            await run.cancel()
            async with asyncio.timeout(PROMPT):  # the bucket is still away
                with pytest.raises(cairn.RunCancelled):
                    await run.result()
            record = await eng.control.record(run.run_id)
            history = await eng.history(run.run_id)
        finally:
            moto_s3.start()
        shown = await eng.history(run.run_id)  # with the bucket back: the payload is there
    assert cleaned == ["x"]
    assert record.status == "CANCELLED" and record.waiting_for is None
    assert words.error_line(json.loads(record.error or "{}")) == (
        "cancelled, in event 'data' (~event:data#1)"
    )
    [data] = [entry for entry in history if entry.key == "~event:data#1"]
    assert data.status == "completed"  # taken, and kept: nothing lost
    [data] = [entry for entry in shown if entry.key == "~event:data#1"]
    assert data.result["offloaded"]["size"] == BIG + 2
    assert data.result["offloaded"]["preview"].startswith('"ddd')
    assert [entry.kind for entry in history].count("cancel") == 1


async def test_blob_read_cancels__arguments_before_the_code_began(
    kit: Kit, moto_s3: MotoS3
) -> None:
    began: list[int] = []

    @kit.workflow("cancels.args")
    async def args(text: str) -> int:
        began.append(1)
        return len(text)

    async with kit.engine(workers=0, blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(args, "a" * BIG, run_id="cancels-args")
    moto_s3.stop()
    try:
        async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
            await waits_for_the_bucket(eng, run.run_id)
            await eng.cancel(run.run_id)
            async with asyncio.timeout(PROMPT):
                with pytest.raises(cairn.RunCancelled):
                    await (await eng.get(run.run_id)).result()
            record = await eng.control.record(run.run_id)
    finally:
        moto_s3.start()
    assert began == []
    assert record.status == "CANCELLED" and record.waiting_for is None
    error: dict[str, Any] = json.loads(record.error or "{}")
    assert error["at"] == blob_reads.ARGUMENTS
    assert words.error_line(error) == (
        "cancelled, before its code began, reading its arguments (~arguments#1)"
    )
