"""The S3-compatible blob store, against moto's local S3 server (from PyPI), both stores."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

import cairn
from cairn.blobs import open_blobs, sweep
from cairn.blobs.s3 import S3Blobs
from cairn.runtime import retention

from .kit import WAIT, Kit

MiB = 1024 * 1024


@pytest.fixture
def s3_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A bucket on a moto S3 server of this test, as an `s3://` blobs URL."""
    server_module = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="cairn-test")
        yield f"s3://cairn-test/blobs?endpoint={endpoint}"
    finally:
        server.stop()


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


async def test_large_values_s3__a_store_without_its_bucket_is_waited_out_too(
    kit: Kit, s3_url: str
) -> None:
    import boto3

    calls: list[int] = []

    @kit.step("s3.outage_step")
    def produce() -> str:
        calls.append(1)
        return "s" * 10_000

    @kit.workflow("s3.outage")
    async def outage() -> int:
        return len(await produce())

    endpoint = s3_url.split("endpoint=")[1]
    s3 = boto3.client("s3", endpoint_url=endpoint)

    def empty() -> None:  # moto's buckets outlive its server in this process
        for found in s3.list_objects_v2(Bucket="cairn-test").get("Contents", []):
            s3.delete_object(Bucket="cairn-test", Key=found["Key"])

    empty()
    s3.delete_bucket(Bucket="cairn-test")  # the store refuses every PUT (NoSuchBucket)
    async with kit.engine(blobs=s3_url, inline_limit="1KiB") as eng:
        run = await eng.start(outage)
        async with asyncio.timeout(WAIT):
            while not calls:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        assert (await eng.control.record(run.run_id)).status == "RUNNING"  # not failed
        s3.create_bucket(Bucket="cairn-test")
        assert await run.result(timeout=WAIT) == 10_000
    assert calls == [1]
    empty()
