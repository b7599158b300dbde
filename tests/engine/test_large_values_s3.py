"""The S3-compatible blob store, against moto's local S3 server (from PyPI), both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import cairn
from cairn import dashboard
from cairn.authoring.schedules import make_schedule
from cairn.blobs import open_blobs, reference, sweep
from cairn.blobs.s3 import S3Blobs
from cairn.runtime import retention

from .kit import WAIT, Kit
from .moto_server import MotoS3
from .seeds import until

MiB = 1024 * 1024


def objects(url: str) -> list[str]:
    blobs = open_blobs(url)
    return sorted(name for name, _ in blobs.listing())


async def test_large_values_s3__a_large_step_result_round_trips_and_is_swept(
    kit: Kit, s3_url: str
) -> None:
    @kit.step("s3.produce")
    def produce(n: int) -> str:
        return "s" * n

    @kit.workflow("s3.flow")
    async def flow(n: int) -> int:
        return len(await produce(n))

    async with kit.engine(blobs=s3_url) as eng:
        blobs: Any = eng.serializer.blobs  # type: ignore[attr-defined]
        assert isinstance(blobs, S3Blobs)
        run = await eng.start(flow, 20 * MiB)
        assert await run.result(timeout=WAIT) == 20 * MiB
        [entry] = await eng.history(run.run_id)
        [name] = objects(s3_url)
        assert entry.result["offloaded"]["sha256"] == name
        assert entry.result["offloaded"]["preview"].startswith('"sss')
        assert blobs.key(name) == f"blobs/{name[:2]}/{name}"
        await retention.prune(eng.store, finished_before=eng.clock.now() + 1, blobs=blobs)
        assert objects(s3_url) == [name]  # fresh: kept for the grace
        assert await sweep.sweep(eng.store, blobs, grace=0) == 1
        assert objects(s3_url) == []


async def test_large_values_s3__a_missing_object_is_named(kit: Kit, s3_url: str) -> None:
    @kit.workflow("s3.result")
    async def result() -> str:
        return "r" * 5000

    async with kit.engine(blobs=s3_url, inline_limit="1KiB") as eng:
        run = await eng.start(result)
        assert await run.result(timeout=WAIT) == "r" * 5000
        blobs: Any = eng.serializer.blobs  # type: ignore[attr-defined]
        [name] = objects(s3_url)
        blobs.client.delete_object(Bucket="cairn-test", Key=blobs.key(name))
        with pytest.raises(cairn.SerializationError, match=f"blob {name} .*missing from s3://"):
            await (await eng.get(run.run_id)).result(timeout=WAIT)


def test_large_values_s3__a_url_without_a_bucket_is_one_line() -> None:
    with pytest.raises(cairn.ConfigError, match="must name a bucket: s3://bucket/prefix"):
        cairn.Engine("memory://", blobs="s3:///nothing")


async def test_large_values_s3__a_store_out_of_reach_is_waited_out(
    kit: Kit, moto_s3: MotoS3
) -> None:
    # No connection (the server is down): it may come back, so the result waits for it.
    calls: list[int] = []

    @kit.step("s3.outage_step")
    def produce() -> str:
        calls.append(1)
        return "s" * 10_000

    @kit.workflow("s3.outage")
    async def outage() -> int:
        return len(await produce())

    moto_s3.stop()
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(outage)
        async with asyncio.timeout(WAIT):
            while not calls:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        moto_s3.start()
        assert await run.result(timeout=WAIT) == 10_000
    assert calls == [1]
    assert len(objects(moto_s3.url)) == 1


async def test_large_values_s3__a_bucket_that_is_not_there_fails_the_step_in_one_line(
    kit: Kit, moto_s3: MotoS3, caplog: pytest.LogCaptureFixture
) -> None:
    # NoSuchBucket (like AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch) does not
    # fix itself: waiting would only hide it. The step fails at once, naming the bucket.
    calls: list[int] = []

    @kit.step("s3.nobucket_step")
    def produce() -> str:
        calls.append(1)
        return "s" * 10_000

    @kit.workflow("s3.nobucket")
    async def nobucket() -> int:
        return len(await produce())

    url = moto_s3.url.replace("s3://cairn-test/", "s3://cairn-gone/")
    async with kit.engine(blobs=url, inline_limit="1KiB") as eng:
        run = await eng.start(nobucket)
        with pytest.raises(cairn.RunFailed) as caught:
            await run.result(timeout=WAIT)
        [entry] = await eng.history(run.run_id)
    assert calls == [1]
    assert entry.status == "failed"
    message = str(caught.value)
    assert "cannot store result of step 's3.nobucket_step' in s3://cairn-gone/blobs: " in message
    assert "bucket 'cairn-gone' refused PUT blobs/" in message and ": NoSuchBucket" in message
    assert not any("until the blob store" in r.getMessage() for r in caplog.records)


def test_large_values_s3__refusals_and_waits_are_told_apart() -> None:
    # What moto does not send: credentials refused, throttling and 5xx, by error code.
    botocore = pytest.importorskip("botocore.exceptions")
    from cairn.blobs import BlobStoreRefused

    class Client:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def put_object(self, **_: Any) -> None:
            raise self.error

    def client_error(code: str, status: int) -> Exception:
        response: Any = {
            "Error": {"Code": code, "Message": f"{code} says no"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return botocore.ClientError(response, "PutObject")

    def raised(error: Exception) -> BaseException:
        blobs = S3Blobs("b1", "p", client=Client(error))
        with pytest.raises(OSError) as caught:
            blobs.put("ab" * 32, b"x")
        return caught.value

    for code, status in [
        ("AccessDenied", 403),
        ("InvalidAccessKeyId", 403),
        ("SignatureDoesNotMatch", 403),
        ("NoSuchBucket", 404),
        ("ExpiredToken", 400),
        ("SomethingForbidden", 403),
    ]:
        refused = raised(client_error(code, status))
        assert isinstance(refused, BlobStoreRefused), code
        assert str(refused) == (
            f"bucket 'b1' refused PUT p/ab/{'ab' * 32}: {code} ({code} says no)"
        )
    for code, status in [
        ("SlowDown", 503),
        ("InternalError", 500),
        ("ServiceUnavailable", 503),
        ("RequestTimeout", 400),
        ("Throttling", 403),
    ]:
        assert not isinstance(raised(client_error(code, status)), BlobStoreRefused), code
    assert isinstance(raised(botocore.NoCredentialsError()), BlobStoreRefused)
    waited = raised(botocore.EndpointConnectionError(endpoint_url="http://x"))
    assert not isinstance(waited, BlobStoreRefused)


async def test_large_values_s3__a_keyless_sender_meeting_a_store_away_says_so_in_one_line(
    kit: Kit, moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A keyless sender reads an offloaded argument's first bytes to tell whether the run
    # is encrypted. A store away for now (no connection here; a 5xx or throttling alike)
    # is StoreUnavailable naming the run, the blob and the store: not botocore's error.
    from .test_encryption import codec
    from .test_keyless_senders import declare_big

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the test
    big_inputs = declare_big(kit, [])
    keyed = kit.engine(blobs=moto_s3.url, codec=codec(), inline_limit="1KiB")
    async with keyed, kit.engine(workers=0, blobs=moto_s3.url, inline_limit="1KiB") as keyless:
        run = await keyed.start(big_inputs, "a" * 5000)
        await until(keyed, run.run_id, "WAITING")
        name = reference.parse((await keyed.control.record(run.run_id)).args).sha256
        moto_s3.stop()
        try:
            with pytest.raises(cairn.StoreUnavailable) as caught:
                await keyless.send_event(run.run_id, "go", "event")
            transport = httpx.ASGITransport(app=dashboard.app(keyless))
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
                sent = await api.post(f"/api/v1/runs/{run.run_id}/events/go", json={})
        finally:
            moto_s3.start()
        assert (sent.status_code, sent.json()["error"]) == (503, "StoreUnavailable")
        # The 503 names the blob store that is away, not "the database".
        assert sent.json()["message"] == (
            f"the blob store s3://cairn-test/blobs did not answer (EndpointConnectionError): "
            f"blob {name} cannot be read for now; try again once it answers"
        )
        await keyed.cancel(run.run_id)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"cannot store the payload of event 'go' for now: run {run.run_id!r} keeps its "
        f"arguments in blob {name}, and reading it from {moto_s3.url.split('?')[0]} failed: "
    )
    assert message.endswith("try again once the blob store answers")


def test_large_values_s3__a_read_that_may_succeed_later_is_an_oserror() -> None:
    # What moto does not send: a 5xx or throttling on the ranged GET of `head`.
    botocore = pytest.importorskip("botocore.exceptions")
    from cairn.blobs import BlobStoreRefused

    class Client:
        def __init__(self, error: Exception) -> None:
            self.error = error

            self.exceptions = type(
                "Exceptions", (), {"NoSuchKey": type("NoSuchKey", (Exception,), {})}
            )

        def get_object(self, **_: Any) -> None:
            raise self.error

    def raised(code: str, status: int) -> BaseException:
        response: Any = {
            "Error": {"Code": code, "Message": f"{code} says no"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        blobs = S3Blobs("b1", "p", client=Client(botocore.ClientError(response, "GetObject")))
        with pytest.raises(OSError) as caught:
            blobs.head("ab" * 32, 70)
        return caught.value

    for code, status in [("SlowDown", 503), ("InternalError", 500), ("Throttling", 403)]:
        failed = raised(code, status)
        assert not isinstance(failed, BlobStoreRefused), code
        assert str(failed).startswith(f"GET p/ab/{'ab' * 32}: "), code
    refused = raised("AccessDenied", 403)
    assert isinstance(refused, BlobStoreRefused)
    assert (
        str(refused)
        == f"bucket 'b1' refused GET p/ab/{'ab' * 32}: AccessDenied (AccessDenied says no)"
    )


async def test_large_values_s3__handed_on_values_wait_for_a_store_out_of_reach(
    kit: Kit, moto_s3: MotoS3
) -> None:
    # A step's stream chunk, a scheduled start's arguments and a declared schedule's
    # arguments, while the bucket does not answer: waited out, none failed or lost
    # (tests/engine/test_blob_outages.py has each on a directory store).
    calls: list[int] = []

    @kit.workflow("s3.later")
    async def later(text: str) -> int:
        return len(text)

    @kit.step("s3.streaming")
    async def streaming() -> int:
        calls.append(1)
        stream = cairn.stream("tokens")
        await stream.write("c" * 10_000)
        await stream.close()
        return 1

    @kit.workflow("s3.hands_on")
    async def hands_on() -> str:
        await streaming()
        return await cairn.schedule_workflow(later, "a" * 10_000)

    make_schedule(later, every="1h", args=("t" * 10_000,), reg=kit.registry)
    moto_s3.stop()
    async with kit.engine(blobs=moto_s3.url, inline_limit="1KiB") as eng:
        run = await eng.start(hands_on)
        async with asyncio.timeout(WAIT):
            while "blob store" not in ((await eng.control.record(run.run_id)).waiting_for or ""):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        assert await eng.schedules.list() == []  # not stored yet, and the engine runs
        moto_s3.start()
        started = await run.result(timeout=WAIT)
        assert await (await eng.get(started)).result(timeout=WAIT) == 10_000
        chunks = [value async for value in eng.read_stream(run.run_id, "tokens")]
        async with asyncio.timeout(WAIT):
            while not await eng.schedules.list():
                await asyncio.sleep(0.02)  # stored by the scheduler's loop
        [schedule] = await eng.schedules.list()
    assert calls == [1]  # the step ran once
    assert chunks == ["c" * 10_000]
    assert schedule.args == ("t" * 10_000,)
