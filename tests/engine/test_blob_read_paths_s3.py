"""Every read of an offloaded value inside a run waits for a bucket away, against moto.

A step's result replayed is in test_blob_reads_s3.py; here the others: the run's
arguments, a child's outcome (replayed, and received), an event's payload (replayed, and
received), a `receive` of offloaded messages (with and without encryption), a hook's
payload, a step-queue step's result and its input (read by the queue's worker), and an
encrypted value. Each one: the run says it waits for the blob store, does not fail, and
its code gets the value once the bucket answers (never StoreUnavailable).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import cairn
from cairn.blobs import reference
from cairn.codecs import Encrypted

from .kit import WAIT, Kit, waits_for_the_blob_store
from .moto_server import MotoS3
from .seeds import until

BIG = 5000  # characters: over the 1 KiB inline_limit these tests set
KEYS = {"k1": b"\x07" * 32}


@pytest.fixture(autouse=True)
def _one_try(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the tests


async def waits_for_the_bucket(eng: cairn.Engine, run_id: str) -> None:
    """The run says it waits for the bucket to give a value back, and has not failed."""
    assert "s3://cairn-test/blobs" in await waits_for_the_blob_store(eng, run_id)


async def waits_for_go(eng: cairn.Engine, run_id: str) -> None:
    """Once the run is parked waiting for the event "go" (what it took before is journaled)."""
    async with asyncio.timeout(WAIT):
        while (await eng.control.record(run_id)).waiting_for != "event:go":
            await asyncio.sleep(0.02)


async def away_then_back(
    moto_s3: MotoS3,
    eng: cairn.Engine,
    run_id: str,
    poke: Callable[..., Awaitable[Any]],
    *args: Any,
) -> None:
    """Stop the bucket, `poke` the run into reading, see it wait, start the bucket."""
    moto_s3.stop()
    try:
        await poke(*args)
        await waits_for_the_bucket(eng, run_id)
    finally:
        moto_s3.start()


async def test_blob_read_paths__the_run_arguments(kit: Kit, moto_s3: MotoS3) -> None:
    # Started (its arguments stored) while the bucket answers; claimed once it is away.
    @kit.workflow("paths.args")
    async def args(text: str) -> int:
        return len(text)

    async with kit.engine(workers=0, blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(args, "a" * BIG, run_id="paths-args")
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        await away_then_back(moto_s3, eng, run.run_id, asyncio.sleep, 0)
        assert await (await eng.get(run.run_id)).result(timeout=WAIT) == BIG


async def test_blob_read_paths__a_child_outcome_replayed(kit: Kit, moto_s3: MotoS3) -> None:
    @kit.workflow("paths.child")
    async def child() -> str:
        return "c" * BIG

    @kit.workflow("paths.parent")
    async def parent() -> int:
        text = await child()
        await cairn.wait_for_event("go", timeout="1h")
        return len(text)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(parent, run_id="paths-child")
        await waits_for_go(eng, run.run_id)
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


async def test_blob_read_paths__a_child_outcome_received(kit: Kit, moto_s3: MotoS3) -> None:
    # The child ends while its parent waits for something else; the parent then takes
    # the child's end (a message) with the bucket away.
    @kit.workflow("paths.child_later")
    async def child() -> str:
        return "c" * BIG

    @kit.workflow("paths.parent_later")
    async def parent() -> int:
        handle = await cairn.start_child(child)
        await cairn.wait_for_event("go", timeout="1h")
        try:
            text = await handle.result()
        except Exception as exc:  # what the workflow would get, if anything reached it
            return -len(type(exc).__name__)
        return len(text)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(parent, run_id="paths-child-later")
        await until(eng, run.run_id, "WAITING")
        await until(eng, f"{run.run_id}/paths.child_later#1", "COMPLETED")
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


async def test_blob_read_paths__an_event_payload_replayed(kit: Kit, moto_s3: MotoS3) -> None:
    @kit.workflow("paths.event")
    async def event() -> int:
        payload = await cairn.wait_for_event("data", timeout="1h")
        await cairn.wait_for_event("go", timeout="1h")
        return len(payload)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(event, run_id="paths-event")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "e" * BIG)
        await until(eng, run.run_id, "WAITING")
        async with asyncio.timeout(WAIT):  # the payload was taken, the run waits for "go"
            while (await eng.control.record(run.run_id)).waiting_for != "event:go":
                await asyncio.sleep(0.02)
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


async def test_blob_read_paths__an_event_payload_received(kit: Kit, moto_s3: MotoS3) -> None:
    @kit.workflow("paths.event_later")
    async def event() -> int:
        await cairn.wait_for_event("go", timeout="1h")
        try:
            payload = await cairn.wait_for_event("data", timeout="1h")
        except Exception as exc:
            return -len(type(exc).__name__)
        return len(payload)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(event, run_id="paths-event-later")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "e" * BIG)  # queued: the run waits for "go"
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


@pytest.mark.parametrize("codec", [None, "encrypted"])
async def test_blob_read_paths__received_messages(
    kit: Kit, moto_s3: MotoS3, codec: str | None
) -> None:
    # `receive` takes several messages as one entry; with encryption their blobs are read
    # inside the write that takes them (core/mailbox.py).
    @kit.workflow("paths.receive")
    async def received() -> list[int]:
        await cairn.wait_for_event("go", timeout="1h")
        try:
            taken = await cairn.receive("data", max_messages=2, timeout="1h")
        except Exception as exc:
            return [-len(type(exc).__name__)]
        return [len(item) for item in taken]

    options: dict[str, Any] = {"blobs": moto_s3.url, "inline_limit": "1KiB"}
    if codec is not None:
        options["codec"] = Encrypted(KEYS, "k1")
    async with kit.engine(**options) as eng:
        run = await eng.start(received, run_id="paths-receive")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "m" * BIG)
        await eng.send_event(run.run_id, "data", "n" * (BIG + 1))
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == [BIG, BIG + 1]


async def test_blob_read_paths__a_hook_payload_replayed(kit: Kit, moto_s3: MotoS3) -> None:
    @kit.workflow("paths.hook")
    async def hooked() -> int:
        hook = await cairn.create_hook("callback", timeout="1h")
        cairn.set_columns(token=hook.token)
        payload = await hook
        await cairn.wait_for_event("go", timeout="1h")
        return len(payload["text"])

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(hooked, run_id="paths-hook")
        await until(eng, run.run_id, "WAITING")
        token = json.loads((await eng.control.record(run.run_id)).columns or "{}")["token"]
        await eng.resume_hook(token, {"text": "h" * BIG})
        await waits_for_go(eng, run.run_id)
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


async def test_blob_read_paths__an_encrypted_step_result(kit: Kit, moto_s3: MotoS3) -> None:
    @kit.step("paths.secret")
    def secret() -> str:
        return "s" * BIG

    @kit.workflow("paths.encrypted")
    async def encrypted() -> int:
        text = await secret()
        await cairn.wait_for_event("go", timeout="1h")
        return len(text)

    options = {"blobs": moto_s3.url, "inline_limit": "1KiB", "codec": Encrypted(KEYS, "k1")}
    async with kit.engine(**options) as eng:
        run = await eng.start(encrypted, run_id="paths-encrypted")
        await until(eng, run.run_id, "WAITING")
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == BIG


async def test_blob_read_paths__received_messages_replayed(kit: Kit, moto_s3: MotoS3) -> None:
    # A receive's entry is a list whose items are references: read back on a replay.
    @kit.workflow("paths.receive_replayed")
    async def received() -> list[int]:
        taken = await cairn.receive("data", max_messages=2, timeout="1h")
        await cairn.wait_for_event("go", timeout="1h")
        return [len(item) for item in taken]

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(received, run_id="paths-receive-replayed")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "m" * BIG)
        await waits_for_go(eng, run.run_id)
        await away_then_back(
            moto_s3, eng, run.run_id, lambda: eng.send_event(run.run_id, "go", None)
        )
        assert await run.result(timeout=WAIT) == [BIG]


async def test_blob_read_paths__a_step_queue_input(kit: Kit, moto_s3: MotoS3) -> None:
    # The step's (offloaded) arguments are stored while the bucket answers; the queue's
    # worker reads them once it is away: waited out under its claim, not the step's failure.
    calls: list[int] = []

    @kit.step("paths.remote_input", queue="gpu")
    def measure(text: str) -> int:
        calls.append(1)
        return len(text)

    @kit.workflow("paths.remote_input_flow")
    async def flow() -> int:
        return await measure("i" * BIG)

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(flow, run_id="paths-remote-input")
        async with asyncio.timeout(WAIT):  # handed to the queue: no worker of it yet
            while "gpu" not in ((await eng.control.record(run.run_id)).waiting_for or ""):
                await asyncio.sleep(0.02)
    moto_s3.stop()
    try:
        async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB", step_queues=["gpu"]) as eng:
            async with asyncio.timeout(WAIT):
                while "blob store" not in (
                    (await eng.control.record(run.run_id)).waiting_for or ""
                ):
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)  # a few more tries
            record = await eng.control.record(run.run_id)
            assert record.status == "WAITING", record.error
            assert (record.waiting_for or "").startswith(reference.WAITING + reference.READING)
            assert calls == []
            moto_s3.start()
            assert await (await eng.get(run.run_id)).result(timeout=WAIT) == BIG
    finally:
        if moto_s3.server is None or not calls:
            with contextlib.suppress(Exception):
                moto_s3.start()
    assert calls == [1]


async def test_blob_read_paths__a_step_queue_report(kit: Kit, moto_s3: MotoS3) -> None:
    # A failed attempt's report is large (its message), so offloaded; the run reads it
    # back each time it replays the step, here once the second attempt reports.
    calls: list[int] = []
    release = threading.Event()

    @kit.step("paths.remote_report", queue="gpu", retries=cairn.Retry(max_attempts=2, delay=0))
    def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("x" * BIG)
        release.wait(WAIT)
        return 7

    @kit.workflow("paths.remote_report_flow")
    async def flow() -> int:
        return await flaky()

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB", step_queues=["gpu"]) as eng:
        run = await eng.start(flow, run_id="paths-remote-report")
        async with asyncio.timeout(WAIT):
            while len(calls) < 2:
                await asyncio.sleep(0.02)
        await away_then_back(moto_s3, eng, run.run_id, asyncio.to_thread, release.set)
        assert await run.result(timeout=WAIT) == 7
    assert len(calls) == 2
