"""Encryption and offloaded values together: a blob holds ciphertext, never the value.

The layers (codecs/coded.py): the serializer's text, its size check, the codec, and,
outermost, the offload. So a big value is encrypted before it is written to the blob
store, a mailbox list of offloaded messages is read back through both layers, and what
people are shown of an encrypted blob names its key instead of ciphertext.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.blobs import store_of
from cairn.codecs import Encrypted
from cairn.errors import SerializationError
from cairn.runtime import rekeying, stored_values

from .kit import WAIT, Kit
from .test_large_values import blob_dir, blob_files, engine

SECRET = "BLOBSECRET-91c2"
KEYS = {"k1": b"\x05" * 32}
BIG = 300 * 1024  # over the 256 KiB inline limit


def stored_blobs(eng: cairn.Engine) -> Any:
    return store_of(eng.serializer)


def encrypted_with(kit: Kit, tmp_path: Path, **options: Any) -> cairn.Engine:
    return engine(kit, tmp_path, codec=Encrypted(KEYS, "k1"), **options)


async def test_encrypted_large_values__the_blob_holds_ciphertext_and_round_trips(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.step("encbig.produce")
    def produce(n: int) -> str:
        return SECRET * (n // len(SECRET))

    @kit.workflow("encbig.flow")
    async def flow(n: int) -> int:
        return len(await produce(n))

    async with encrypted_with(kit, tmp_path) as eng:
        run = await eng.start(flow, BIG)
        assert await run.result(timeout=WAIT) == (BIG // len(SECRET)) * len(SECRET)
        [entry] = await eng.history(run.run_id)
    [blob] = blob_files(blob_dir(kit, tmp_path))
    data = blob.read_bytes()
    assert data.startswith(b"aesgcm:k1:") and SECRET.encode() not in data
    assert entry.result["offloaded"]["preview"] == "encrypted (k1)"


async def test_encrypted_large_values__offloaded_messages_received_together(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("encbig.receive")
    async def inbox() -> Any:
        return await cairn.receive("orders", max_messages=3)

    big = SECRET + "y" * 5000
    async with encrypted_with(kit, tmp_path, inline_limit="1KiB", workers=0) as queuer:
        run = await queuer.start(inbox)
        for payload in (big, {"n": 2}, big + "!"):
            await queuer.send_event(run.run_id, "orders", payload)
    async with encrypted_with(kit, tmp_path, inline_limit="1KiB") as eng:
        handle = await eng.get(run.run_id)
        assert await handle.result(timeout=WAIT) == [big, {"n": 2}, big + "!"]
    blobs = blob_files(blob_dir(kit, tmp_path))
    assert blobs and all(SECRET.encode() not in blob.read_bytes() for blob in blobs)


async def test_encrypted_large_values__a_download_is_the_plain_value_or_names_the_key(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.step("encbig.make")
    def make(n: int) -> str:
        return SECRET * (n // len(SECRET))

    @kit.workflow("encbig.download")
    async def flow(n: int) -> int:
        return len(await make(n))

    async with encrypted_with(kit, tmp_path) as eng:
        run = await eng.start(flow, BIG)
        await run.result(timeout=WAIT)
        whole = await stored_values.stored_text(eng.control, run.run_id, "encbig.make#1")
        assert json.loads(whole).startswith(SECRET)
        assert json.loads(await stored_values.stored_text(eng.control, run.run_id, "args")) == {
            "args": [BIG],
            "kwargs": {},
        }
    async with engine(kit, tmp_path, workers=0) as keyless:
        with pytest.raises(SerializationError, match="key 'k1'"):
            await stored_values.stored_text(keyless.control, run.run_id, "encbig.make#1")


async def test_encrypted_large_values__with_a_step_queue_a_sync_timeout_and_a_fork(
    kit: Kit, tmp_path: Path
) -> None:
    """The layers hold where features meet: a big result from a step-queue worker, a sync
    step with a timeout, and a fork that keeps the completed (offloaded) step."""

    @kit.step("encbig.render", queue="gpu")
    async def render(n: int) -> str:
        return SECRET * (n // len(SECRET))

    @kit.step("encbig.count", timeout="5s")
    def count(text: str) -> int:
        return len(text)

    @kit.workflow("encbig.mixed")
    async def mixed(n: int) -> int:
        return await count(await render(n))

    expected = (BIG // len(SECRET)) * len(SECRET)
    async with encrypted_with(kit, tmp_path, step_queues=["gpu"]) as eng:
        run = await eng.start(mixed, BIG)
        assert await run.result(timeout=WAIT) == expected
        forked = await eng.fork(run.run_id, 1)
        assert await forked.result(timeout=WAIT) == expected
        history = await eng.history(forked.run_id)
    [rendered] = [e for e in history if e.key == "encbig.render#1"]
    assert rendered.result["offloaded"]["preview"] == "encrypted (k1)"
    for blob in blob_files(blob_dir(kit, tmp_path)):
        assert SECRET.encode() not in blob.read_bytes()


async def test_encrypted_large_values__rekey_rewrites_offloaded_values_so_the_old_key_can_go(
    kit: Kit, tmp_path: Path
) -> None:
    # `cairn db rekey`, then dropping the old key, as docs/howto/encryption.md says: a
    # run parked past an offloaded value must still be read, not handed back for ever.
    @kit.step("encbig.early")
    def early() -> str:
        return SECRET * (BIG // len(SECRET))

    @kit.workflow("encbig.parked")
    async def parked() -> list[int]:
        text = await early()
        await cairn.wait_for_event("go")
        return [len(text), len(await cairn.wait_for_event("box"))]

    k2 = {"k2": b"\x06" * 32}
    both = Encrypted({**KEYS, **k2}, "k2")
    async with encrypted_with(kit, tmp_path) as eng:
        run = await eng.start(parked)
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
        await eng.send_event(run.run_id, "box", SECRET * (BIG // len(SECRET)))  # kept
    old_blobs = blob_files(blob_dir(kit, tmp_path))
    async with engine(kit, tmp_path, codec=both, workers=0) as eng:
        done = await rekeying.rekey(eng.store, both, blobs=stored_blobs(eng))
    assert done["steps.result (offloaded)"] == 1 and done["messages.payload (offloaded)"] == 1
    new_blobs = [b for b in blob_files(blob_dir(kit, tmp_path)) if b not in old_blobs]
    assert len(new_blobs) == 2
    assert all(b.read_bytes().startswith(b"aesgcm:k2:") for b in new_blobs)
    async with engine(kit, tmp_path, codec=Encrypted(k2, "k2")) as eng:  # k1 dropped
        assert await rekeying.rekey(eng.store, both, blobs=stored_blobs(eng)) == {}
        await eng.send_event(run.run_id, "go", None)
        size = (BIG // len(SECRET)) * len(SECRET)
        assert await (await eng.get(run.run_id)).result(timeout=WAIT) == [size, size]
