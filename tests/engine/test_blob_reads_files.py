"""Reading an offloaded value back from a file blob store that fails, on both stores.

Root cannot be refused a file by permissions, so the failures are made otherwise: a blob
file replaced by a directory, its directory replaced by a file, a truncated file, a
missing one, and the store's directory gone (moved away, replaced by a file, or an
unmounted tmpfs). A damaged or lost blob fails the run in one line naming the blob and
what to do, and the run completes once it is restored and retried; a store out of reach
is waited out, the run saying so. Never a traceback, and nothing stored is changed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn.blobs import reference

from .kit import WAIT, Kit, waits_for_the_blob_store
from .test_large_values import blob_dir, blob_files, engine

BIG = 10_000


def declare(kit: Kit, calls: list[int]) -> Any:
    @kit.step("files.fetch")
    def fetch() -> str:
        calls.append(1)
        return "f" * BIG

    @kit.workflow("files.later")
    async def later() -> int:
        text = await fetch()
        await cairn.wait_for_event("go", timeout="1h")
        return len(text)

    return later


async def parked(kit: Kit, tmp_path: Path, run_id: str, calls: list[int], **options: Any) -> Path:
    """Start the run and let it park after its step; its one blob file."""
    later = declare(kit, calls)
    async with engine(kit, tmp_path, inline_limit="1KiB", **options) as eng:
        run = await eng.start(later, run_id=run_id)
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
    [blob] = blob_files(blob_dir(kit, tmp_path))
    return blob


def damage_directory(blob: Path) -> bytes:
    data = blob.read_bytes()
    blob.unlink()
    blob.mkdir()
    return data


def damage_parent(blob: Path) -> bytes:
    data = blob.read_bytes()
    shutil.rmtree(blob.parent)
    blob.parent.write_text("not a directory")
    return data


def damage_truncated(blob: Path) -> bytes:
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2])
    return data


def damage_missing(blob: Path) -> bytes:
    data = blob.read_bytes()
    blob.unlink()
    return data


def restore(blob: Path, data: bytes) -> None:
    if blob.parent.is_file():
        blob.parent.unlink()
    if blob.is_dir():
        blob.rmdir()
    blob.parent.mkdir(exist_ok=True)
    blob.write_bytes(data)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (damage_directory, "is not a blob file (Is a directory); something else is in its place"),
        (damage_parent, "is not a blob file (Not a directory); something else is in its place"),
        (damage_truncated, "is corrupt: its bytes do not match its sha256 and size"),
        (damage_missing, "is missing from file://"),
    ],
    ids=["a directory in its place", "a file for its directory", "truncated", "missing"],
)
async def test_blob_reads_files__a_damaged_blob_fails_the_run_in_one_line(
    kit: Kit, tmp_path: Path, damage: Callable[[Path], bytes], says: str
) -> None:
    calls: list[int] = []
    run_id = "files-damaged"
    blob = await parked(kit, tmp_path, run_id, calls)
    data = damage(blob)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        await eng.send_event(run_id, "go", None)
        with pytest.raises(cairn.RunFailed) as caught:
            await (await eng.get(run_id)).result(timeout=WAIT)
        [entry] = [e for e in await eng.history(run_id) if e.key == "files.fetch#1"]
    message = str(caught.value)
    assert f"run '{run_id}': result of step 'files.fetch#1': blob {blob.name} " in message
    assert says in message
    assert message.endswith(
        "; restore the blob from a backup of the blob store, then retry the run "
        f"(cairn runs retry {run_id})"
    )
    assert "\n" not in message and "Traceback" not in message
    assert entry.status == "completed"  # the step's record is as it was
    restore(blob, data)  # what the message says to do
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        handle = await eng.retry(run_id)
        assert await handle.result(timeout=WAIT) == BIG
    assert calls == [1]  # the step did not run again: its result was read back


def gone_moved(where: Path) -> Callable[[], None]:
    aside = where.with_name(where.name + ".aside")
    where.rename(aside)
    return lambda: aside.rename(where)


def gone_replaced_by_a_file(where: Path) -> Callable[[], None]:
    aside = where.with_name(where.name + ".aside")
    where.rename(aside)
    where.write_text("not a directory")

    def back() -> None:
        where.unlink()
        aside.rename(where)

    return back


def gone_emptied(where: Path) -> Callable[[], None]:
    # What an unmounted filesystem leaves: its mount point, empty.
    aside = where.with_name(where.name + ".aside")
    where.rename(aside)
    where.mkdir()

    def back() -> None:
        where.rmdir()
        aside.rename(where)

    return back


@pytest.mark.parametrize(
    ("gone", "says"),
    [
        (gone_moved, "is not there (is its filesystem mounted?)"),
        (gone_replaced_by_a_file, "is not a directory"),
        (gone_emptied, "is empty (is its filesystem mounted?)"),
    ],
    ids=["moved away", "a file in its place", "empty"],
)
async def test_blob_reads_files__a_store_directory_gone_is_waited_out(
    kit: Kit, tmp_path: Path, gone: Callable[[Path], Callable[[], None]], says: str
) -> None:
    calls: list[int] = []
    run_id = "files-gone"
    blob = await parked(kit, tmp_path, run_id, calls)
    where = blob_dir(kit, tmp_path)
    back = gone(where)
    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        await eng.send_event(run_id, "go", None)
        note = await waits_for_the_blob_store(eng, run_id)
        back()
        assert await (await eng.get(run_id)).result(timeout=WAIT) == BIG
        assert (await eng.control.record(run_id)).waiting_for is None
    assert note.startswith(f"{reference.WAITING}{reference.READING}{blob.name} from file://")
    assert f"the blob store directory {where} {says}" in note
    assert calls == [1]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted for the test (skipped where this process may not mount)."""
    point = tmp_path / "mounted"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], capture_output=True, check=False)


async def test_blob_reads_files__an_unmounted_filesystem_is_waited_out(
    kit: Kit, tmp_path: Path, tmpfs: Path
) -> None:
    calls: list[int] = []
    run_id = "files-unmounted"
    store = tmpfs / "blobs"
    options = {"blobs": store.as_uri()}
    later = declare(kit, calls)
    async with kit.engine(inline_limit="1KiB", **options) as eng:
        run = await eng.start(later, run_id=run_id)
        async with asyncio.timeout(WAIT):
            while (await eng.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.01)
    kept = tmp_path / "kept"
    shutil.copytree(store, kept)
    subprocess.run(["umount", str(tmpfs)], check=True)
    async with kit.engine(inline_limit="1KiB", **options) as eng:
        await eng.send_event(run_id, "go", None)
        note = await waits_for_the_blob_store(eng, run_id)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(tmpfs)], check=True)
        shutil.copytree(kept, store)
        assert await (await eng.get(run_id)).result(timeout=WAIT) == BIG
    assert "is not there (is its filesystem mounted?)" in note
    assert calls == [1]


async def test_blob_reads_files__a_truncated_blob_is_written_whole_again(
    kit: Kit, tmp_path: Path
) -> None:
    # Content-addressed: storing the same value again finds its file. A file that is not
    # the whole blob (truncated) is written again, not taken for it.
    @kit.workflow("files.same")
    async def same() -> str:
        return "s" * BIG

    async with engine(kit, tmp_path, inline_limit="1KiB") as eng:
        assert await (await eng.start(same)).result(timeout=WAIT) == "s" * BIG
        [blob] = blob_files(blob_dir(kit, tmp_path))
        whole = blob.read_bytes()
        blob.write_bytes(whole[:100])
        again = await eng.start(same)
        assert await again.result(timeout=WAIT) == "s" * BIG
    assert blob.read_bytes() == whole
