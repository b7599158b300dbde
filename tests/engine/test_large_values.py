"""Offloaded values: a text over inline_limit goes to the blob store, on both stores."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.blobs import BlobError, FileBlobs
from cairn.errors import SerializationError
from cairn.representation import runs as run_forms

from .kit import WAIT, Kit
from .seeds import until

MiB = 1024 * 1024


def blob_dir(kit: Kit, tmp_path: Path) -> Path:
    """Where this kit's engines keep blobs: beside the SQLite file, or a given directory."""
    if kit.url.startswith("sqlite"):
        return Path(kit.url.removeprefix("sqlite:///") + ".blobs")
    return tmp_path / "shared-blobs"


def engine(kit: Kit, tmp_path: Path, **options: Any) -> cairn.Engine:
    """An engine of `kit` whose blobs are in `blob_dir` (the default, on SQLite)."""
    if not kit.url.startswith("sqlite"):
        options.setdefault("blobs", blob_dir(kit, tmp_path).as_uri())
    return kit.engine(**options)


def blob_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*/*") if not p.name.endswith(".tmp"))


def longest_stored(url: str) -> int:
    rows = execute(
        url,
        "SELECT MAX(LENGTH(result)) FROM steps UNION ALL SELECT MAX(LENGTH(result)) FROM runs",
    )
    return max(int(r[0] or 0) for r in rows)


async def test_large_values__a_50_mib_step_result_round_trips_through_a_blob(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.step("big.produce")
    def produce(n: int) -> str:
        return "x" * n

    @kit.workflow("big.flow")
    async def flow(n: int) -> int:
        text = await produce(n)
        return len(text)

    async with engine(kit, tmp_path) as eng:
        run = await eng.start(flow, 50 * MiB)
        assert await run.result(timeout=60) == 50 * MiB
        [entry] = await eng.history(run.run_id)
    assert longest_stored(kit.url) < 1000  # the history keeps a reference only
    [blob] = blob_files(blob_dir(kit, tmp_path))
    data = blob.read_bytes()
    assert blob.name == hashlib.sha256(data).hexdigest() and len(data) == 50 * MiB + 2
    shown = entry.result["offloaded"]  # what people see: size, hash, a preview
    assert shown["size"] == 50 * MiB + 2 and shown["sha256"] == blob.name
    assert shown["preview"].startswith('"xxxx') and len(shown["preview"]) == 1000


async def test_large_values__small_values_stay_inline_and_write_no_blob(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("big.small")
    async def small(text: str) -> str:
        return text * 2

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(small, "a" * 100)
        assert await run.result(timeout=WAIT) == "a" * 200
    assert blob_files(blob_dir(kit, tmp_path)) == []


async def test_large_values__the_result_of_a_run_over_the_limit_is_read_back(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("big.echo")
    async def echo(data: dict[str, Any]) -> dict[str, Any]:
        return {"got": data}

    value = {"rows": [{"i": i, "name": f"row {i}"} for i in range(2000)]}
    async with engine(kit, tmp_path, inline_limit="4KiB") as eng:
        run = await eng.start(echo, value)
        assert await run.result(timeout=WAIT) == {"got": value}
        shown = run_forms.run_dict(await run_forms.fetch(eng.control, run.run_id))
    assert shown["args"]["offloaded"]["preview"].startswith('{"args":[{"rows":')
    assert shown["result"]["offloaded"]["size"] > 4096 and shown["kwargs"] == {}
    assert len(blob_files(blob_dir(kit, tmp_path))) == 2  # the arguments and the result


async def test_large_values__messages_received_together_may_be_offloaded(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("big.receive")
    async def take_all() -> list[Any]:
        return await cairn.receive("orders", max_messages=8)

    big = "m" * 5000
    async with engine(kit, tmp_path, inline_limit="1KiB", workers=0) as queuer:
        run = await queuer.start(take_all)
        for payload in ({"n": 1}, big, {"n": 3}, big + "!"):
            await queuer.send_event(run.run_id, "orders", payload)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        handle = await eng.get(run.run_id)
        assert await handle.result(timeout=WAIT) == [{"n": 1}, big, {"n": 3}, big + "!"]


async def test_large_values__a_missing_blob_fails_naming_run_step_and_blob(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.step("big.fetch")
    def fetch() -> str:
        return "f" * 10_000

    @kit.workflow("big.later")
    async def later() -> int:
        text = await fetch()
        await cairn.wait_for_event("go", timeout="1h")
        return len(text)

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(later, run_id="needs-blob")
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
    [blob] = blob_files(blob_dir(kit, tmp_path))
    blob.unlink()
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        await eng.send_event(run.run_id, "go", None)
        with pytest.raises(cairn.RunFailed) as caught:
            await (await eng.get(run.run_id)).result(timeout=WAIT)
    message = str(caught.value)
    assert f"run 'needs-blob': result of step 'big.fetch#1': blob {blob.name} " in message
    assert "is missing from" in message


async def test_large_values__a_corrupt_blob_is_refused_by_its_hash(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.workflow("big.result")
    async def result() -> str:
        return "r" * 10_000

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(result, run_id="corrupt-blob")
        assert await run.result(timeout=WAIT) == "r" * 10_000
        [blob] = blob_files(blob_dir(kit, tmp_path))
        blob.write_bytes(blob.read_bytes().replace(b"r", b"s", 1))
        with pytest.raises(BlobError, match=f"blob {blob.name} .*is corrupt"):
            await (await eng.get(run.run_id)).result(timeout=WAIT)


async def test_large_values__postgresql_without_a_blob_store_refuses_in_one_line(
    pg_url: str,
) -> None:
    kit = Kit(pg_url)

    @kit.workflow("big.pg")
    async def echo(text: str) -> int:
        return len(text)

    async with kit.engine(inline_limit="1KiB") as eng:
        with pytest.raises(SerializationError) as caught:
            await eng.start(echo, "p" * 2000)
        ok = await eng.start(echo, "p" * 100)
        assert await ok.result(timeout=WAIT) == 100
    message = str(caught.value)
    assert "\n" not in message and "no blob store" in message and "blobs=" in message


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"inline_limit": "lots"}, "inline_limit must be a size such as '2MiB'"),
        ({"inline_limit": 0}, "inline_limit must be larger than zero"),
        ({"blobs": "ftp://host/x"}, "blobs 'ftp://host/x' is not a blob store URL"),
        ({"blobs": "file://elsewhere/x"}, "must name a local directory"),
        ({"blobs": ""}, "blobs must be a URL such as 'file:///srv/cairn-blobs'"),
    ],
)
def test_large_values__bad_settings_are_one_line_config_errors(
    options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(cairn.ConfigError) as caught:
        cairn.Engine("memory://", **options)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_large_values__settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CAIRN_INLINE_LIMIT", "64KiB")
    monkeypatch.setenv("CAIRN_BLOBS", (tmp_path / "b").as_uri())
    eng = cairn.Engine("memory://")
    assert eng.serializer.inline_limit == 64 * 1024  # type: ignore[attr-defined]
    blobs = eng.serializer.blobs  # type: ignore[attr-defined]
    assert isinstance(blobs, FileBlobs) and blobs.directory == tmp_path / "b"
    monkeypatch.setenv("CAIRN_INLINE_LIMIT", "-1")
    with pytest.raises(cairn.ConfigError, match="CAIRN_INLINE_LIMIT must be"):
        cairn.Engine("memory://")


async def test_large_values__a_large_step_input_is_cut_short_not_offloaded(
    kit: Kit, tmp_path: Path
) -> None:
    @kit.step("big.measure")
    def measure(text: str) -> int:
        return len(text)

    @kit.workflow("big.inputs")
    async def inputs(n: int) -> int:
        return await measure("i" * n)

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        run = await eng.start(inputs, 100_000)
        assert await run.result(timeout=WAIT) == 100_000
    assert blob_files(blob_dir(kit, tmp_path)) == []  # the input is shown cut, never stored whole


async def test_large_values__a_client_sends_and_reads_offloaded_values(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_INLINE_LIMIT", "1KiB")
    if not kit.url.startswith("sqlite"):
        monkeypatch.setenv("CAIRN_BLOBS", blob_dir(kit, tmp_path).as_uri())

    @kit.workflow("big.client")
    async def waiting() -> str:
        text: str = await cairn.wait_for_event("data", timeout="1h")
        return text + "!"

    async with engine(kit, tmp_path) as eng:
        run = await eng.start(waiting)
        client = await asyncio.to_thread(cairn.Client, kit.url, registry=kit.registry)
        try:
            handle = await asyncio.to_thread(client.get, run.run_id)
            await asyncio.to_thread(handle.send_event, "data", "c" * 5000)
            assert await asyncio.to_thread(handle.result, WAIT) == "c" * 5000 + "!"
        finally:
            await asyncio.to_thread(client.close)
    assert len(blob_files(blob_dir(kit, tmp_path))) == 2  # the event's payload, the result


def test_large_values__settings_come_from_the_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.cairn]\ninline_limit = "2KiB"\nblobs = "{(tmp_path / "py").as_uri()}"\n'
    )
    eng = cairn.Engine("memory://")
    assert eng.serializer.inline_limit == 2048  # type: ignore[attr-defined]
    (tmp_path / "cairn.yaml").write_text(f"inline_limit: 3KiB\nblobs: {tmp_path / 'yaml'}\n")
    eng = cairn.Engine("memory://")
    assert eng.serializer.inline_limit == 3072  # type: ignore[attr-defined]
    assert eng.serializer.blobs.directory == tmp_path / "yaml"  # type: ignore[attr-defined]
    (tmp_path / "cairn.yaml").write_text("inline_limit: [1]\n")
    with pytest.raises(cairn.ConfigError, match="inline_limit must be a size"):
        cairn.Engine("memory://")


async def test_large_values__an_offloaded_value_is_logged_once_per_name_an_inline_one_each_time(
    kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Offloading is the designed path for a large value: one warning per value name (a
    # step's results), not one per value; a large value kept inline is logged each time.
    @kit.step("big.part")
    def part(n: int) -> str:
        return "p" * n

    @kit.workflow("big.parts")
    async def parts(n: int, times: int) -> int:
        return sum([len(await part(n)) for _ in range(times)])

    caplog.set_level(logging.WARNING, logger="cairn.limits")
    async with engine(kit, tmp_path, inline_limit="4KiB", warn_value_size="1KiB") as eng:
        assert await (await eng.start(parts, 6000, 3)).result(timeout=WAIT) == 18000
        assert await (await eng.start(parts, 6000, 2)).result(timeout=WAIT) == 12000
        offloaded = [r.getMessage() for r in caplog.records if "big.part'" in r.getMessage()]
        assert len(offloaded) == 1, offloaded
        assert "offloaded" in offloaded[0] and "once" in offloaded[0]
        caplog.clear()
        assert await (await eng.start(parts, 2000, 2)).result(timeout=WAIT) == 4000
    inline = [r.getMessage() for r in caplog.records if "big.part'" in r.getMessage()]
    assert len(inline) == 2 and all("kept inline" in m for m in inline), inline


async def test_large_values__blobs_are_written_and_read_off_the_event_loop(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 50 MiB value's hash, write and fsync (or fetch and check) would hold the loop for
    # tens of milliseconds: arguments, step and workflow results, an event's payload and
    # a replayed step's result go through the blob store in a thread.
    threads: dict[str, list[int]] = {"put": [], "get": []}
    put, get = FileBlobs.put, FileBlobs.get

    def put_noted(self: FileBlobs, sha256: str, data: bytes) -> None:
        threads["put"].append(threading.get_ident())
        put(self, sha256, data)

    def get_noted(self: FileBlobs, sha256: str) -> bytes | None:
        threads["get"].append(threading.get_ident())
        return get(self, sha256)

    monkeypatch.setattr(FileBlobs, "put", put_noted)
    monkeypatch.setattr(FileBlobs, "get", get_noted)

    @kit.step("big.load")
    async def load(n: int) -> str:
        return "L" * n

    @kit.workflow("big.offloop")
    async def offloop(text: str) -> int:
        loaded = await load(len(text))
        got = await cairn.wait_for_event("go")  # parks: the next attempt replays `load`
        return len(loaded + text + got)

    async with engine(kit, tmp_path, inline_limit="4KiB") as eng:
        run = await eng.start(offloop, "a" * 6000)
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "go", "e" * 6000)
        assert await run.result(timeout=WAIT) == 18000
    loop = threading.get_ident()
    assert len(threads["put"]) == 3 and len(threads["get"]) >= 3, threads
    assert loop not in threads["put"] + threads["get"]


async def test_large_values__an_offloaded_run_result_is_read_off_the_event_loop(
    kit: Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `handle.result()` is awaited on the caller's loop: fetching and checking a 50 MiB
    # result there would hold every other task of that loop.
    readers: list[int] = []
    get = FileBlobs.get

    def get_noted(self: FileBlobs, sha256: str) -> bytes | None:
        readers.append(threading.get_ident())
        return get(self, sha256)

    monkeypatch.setattr(FileBlobs, "get", get_noted)

    @kit.workflow("big.result")
    async def big_result(n: int) -> str:
        return "R" * n

    async with engine(kit, tmp_path, inline_limit="4KiB") as eng:
        run = await eng.start(big_result, 6000)
        await until(eng, run.run_id, "COMPLETED")
        readers.clear()
        assert await run.result(timeout=WAIT) == "R" * 6000
        assert await (await eng.get(run.run_id)).result(timeout=WAIT) == "R" * 6000
    assert len(readers) == 2 and threading.get_ident() not in readers, readers
