"""Reading an offloaded value back from an S3 bucket that fails, against moto, both stores.

A bucket away for now (no connection; a 5xx or throttling alike) is waited out by a run
replaying the value, and is a 503 naming the blob store elsewhere. A bucket that refuses
(no such bucket; access denied, bad credentials alike) is one line naming the bucket.
Never botocore's own error, nor a traceback.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import cairn
from cairn import dashboard
from cairn.blobs import reference
from cairn.representation import runs as run_forms
from cairn.representation import words

from .kit import WAIT, Kit
from .moto_server import MotoS3
from .seeds import until

BIG = 5000  # characters: over the 1 KiB inline_limit these tests set


@pytest.fixture(autouse=True)
def _one_try(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the tests


def declare(kit: Kit) -> Any:
    """A workflow whose step's result is offloaded, then read back after an event."""

    @kit.step("reads.fetch")
    def fetch() -> str:
        return "f" * BIG

    @kit.workflow("reads.later")
    async def later() -> int:
        text = await fetch()
        await cairn.wait_for_event("go", timeout="1h")
        return len(text)

    return later


async def test_blob_reads__a_replay_waits_for_a_bucket_away_and_then_goes_on(
    kit: Kit, moto_s3: MotoS3
) -> None:
    later = declare(kit)
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(later, run_id="reads-away")
        await until(eng, run.run_id, "WAITING")
        moto_s3.stop()
        try:
            await eng.send_event(run.run_id, "go", None)  # the replay reads the step's result
            async with asyncio.timeout(WAIT):
                while True:
                    record = await eng.control.record(run.run_id)
                    assert record.status in ("WAITING", "PENDING", "RUNNING"), record.error
                    if (record.waiting_for or "").startswith(reference.WAITING):
                        break
                    await asyncio.sleep(0.02)
            shown = await run_forms.fetch(eng.control, run.run_id)
            assert shown.waiting is not None and shown.waiting["kind"] == "blobs"
            text = words.waiting_text(shown.waiting, now=shown.now, run_id=run.run_id)
            assert text.startswith(
                "the blob store to give back a value (retried until it does): cannot read blob "
            )
            assert "from s3://cairn-test/blobs: GET blobs/" in text and "\n" not in text
            await asyncio.sleep(0.3)  # a few more tries: still not failed
            assert (await eng.control.record(run.run_id)).status == "RUNNING"
        finally:
            moto_s3.start()
        assert await run.result(timeout=WAIT) == BIG
        assert (await eng.control.record(run.run_id)).waiting_for is None


async def test_blob_reads__a_bucket_that_refuses_fails_the_run_in_one_line(
    kit: Kit, moto_s3: MotoS3
) -> None:
    later = declare(kit)
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(later, run_id="reads-refused")
        await until(eng, run.run_id, "WAITING")
    gone = moto_s3.url.replace("s3://cairn-test/", "s3://cairn-gone/")
    async with kit.engine(blobs=gone, inline_limit="1KiB") as eng:
        await eng.send_event(run.run_id, "go", None)
        with pytest.raises(cairn.RunFailed) as caught:
            await (await eng.get(run.run_id)).result(timeout=WAIT)
    message = str(caught.value)
    assert "run 'reads-refused': result of step 'reads.fetch#1': blob " in message
    assert "cannot be read from s3://cairn-gone/blobs: bucket 'cairn-gone' refused GET" in message
    assert ": NoSuchBucket (" in message
    assert "botocore" not in message and "Traceback" not in message


async def test_blob_reads__show_and_the_api_say_which_blob_store_is_away(
    kit: Kit, moto_s3: MotoS3
) -> None:
    # `cairn runs show` and the run page: the value is said unreadable, the rest is shown.
    # Its download (`cairn runs show --download`, GET .../values/result): a 503 naming
    # the blob store, not the database, nor a 500.
    @kit.workflow("reads.result")
    async def result() -> str:
        return "r" * BIG

    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(result, run_id="reads-shown")
        assert await run.result(timeout=WAIT) == "r" * BIG
        transport = httpx.ASGITransport(app=dashboard.app(eng))
        moto_s3.stop()
        try:
            shown = await run_forms.fetch(eng.control, run.run_id)
            line = words.short(shown.result, width=300)
            assert line.startswith(
                "unreadable blob (s3://cairn-test/blobs did not answer (EndpointConnectionError)): "
                "offloaded 4.9 KiB sha256:"
            )
            with pytest.raises(cairn.StoreUnavailable) as caught:
                await (await eng.get(run.run_id)).result(timeout=WAIT)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as web:
                got = await web.get(f"/api/v1/runs/{run.run_id}")
                whole = await web.get(f"/api/v1/runs/{run.run_id}/values/result")
                page = await web.get(f"/runs/{run.run_id}")
        finally:
            moto_s3.start()
    assert "cannot read blob " in str(caught.value) and "s3://cairn-test/blobs" in str(caught.value)
    assert got.status_code == 200, got.text
    offloaded = got.json()["result"]["offloaded"]
    assert (
        offloaded["unreadable"] == "s3://cairn-test/blobs did not answer (EndpointConnectionError)"
    )
    assert (whole.status_code, whole.json()["error"]) == (503, "StoreUnavailable")
    message = whole.json()["message"]
    assert message.startswith("the blob store s3://cairn-test/blobs did not answer (")
    assert "database" not in message and "127.0.0.1" not in message
    assert page.status_code == 200, page.text
    assert (
        "unreadable blob (s3://cairn-test/blobs did not answer (EndpointConnectionError)): "
        "offloaded 4.9 KiB" in page.text
    )


async def test_blob_writes__a_start_meeting_a_bucket_away_is_a_503_naming_it(
    kit: Kit, moto_s3: MotoS3
) -> None:
    # Outside a run there is no attempt to wait in: nothing is stored and the caller may
    # send it again. Not the request's fault (no 422), and not "the database" either.
    @kit.workflow("writes.big_args")
    async def big_args(text: str) -> int:
        return len(text)

    async with kit.engine(workers=0, blobs=moto_s3.url, inline_limit="1KiB") as eng:
        transport = httpx.ASGITransport(app=dashboard.app(eng))
        moto_s3.stop()
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
                sent = await api.post(
                    "/api/v1/runs", json={"workflow": "writes.big_args", "args": ["a" * BIG]}
                )
        finally:
            moto_s3.start()
        assert (await eng.list_runs()).runs == []  # nothing was stored
    assert (sent.status_code, sent.json()["error"]) == (503, "StoreUnavailable"), sent.text
    assert sent.json()["message"] == (
        "cannot store arguments of workflow 'writes.big_args' for now: the blob store "
        "s3://cairn-test/blobs did not take it (EndpointConnectionError); nothing was "
        "stored: try again once it does"
    )


async def test_blob_reads__a_worker_stopping_meanwhile_hands_the_run_back(
    kit: Kit, moto_s3: MotoS3
) -> None:
    # The wait for the bucket does not hold up the worker's stop: the run goes back,
    # and the next worker finishes it once the bucket answers.
    later = declare(kit)
    moto_s3_down = False
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(later, run_id="reads-stop")
        await until(eng, run.run_id, "WAITING")
        moto_s3.stop()
        moto_s3_down = True
        await eng.send_event(run.run_id, "go", None)
        async with asyncio.timeout(WAIT):
            while not ((await eng.control.record(run.run_id)).waiting_for or "").startswith(
                reference.WAITING
            ):
                await asyncio.sleep(0.02)
    try:
        async with kit.engine(workers=0) as look:
            record = await look.control.record(run.run_id)
    finally:
        if moto_s3_down:
            moto_s3.start()
    assert record.status == "PENDING", record  # handed back (a note left says nothing now)
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        assert await (await eng.get(run.run_id)).result(timeout=WAIT) == BIG
