"""memory:// and file:///dir: what they open, what they share, and bad spellings named."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import ConfigError
from cairn.store import locations, open_store
from cairn.store.programs import runs as run_ops
from cairn.store.sqlite.directory import DirectoryStore
from cairn.store.sqlite.store import SqliteStore

from .kit import run_record


async def test_memory__stores_of_one_process_share_it_until_the_last_closes() -> None:
    first, second = open_store("memory://"), open_store("memory://")
    assert isinstance(first, SqliteStore) and first.side_channel() is None
    await first.open()
    await second.open()
    await first.write(run_ops.create_run(run_record("r1")))
    assert (await second.read(run_ops.get_run("r1"))) is not None
    await first.close()
    assert (await second.read(run_ops.get_run("r1"))) is not None  # one store still holds it
    await second.close()

    again = open_store("memory://")
    await again.open()
    try:
        assert await again.read(run_ops.get_run("r1")) is None  # gone with the last connection
    finally:
        await again.close()


async def test_file__keeps_one_sqlite_file_in_a_directory_it_makes(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "store"
    store = open_store(f"file://{directory}")
    assert isinstance(store, DirectoryStore)
    await store.open()
    try:
        await store.write(run_ops.create_run(run_record("r1")))
    finally:
        await store.close()
    assert (directory / "cairn.db").is_file()
    assert directory.stat().st_mode & 0o777 == 0o700

    reopened = open_store(f"file://localhost{directory}")  # the same directory, a host spelt
    await reopened.open()
    try:
        assert await reopened.read(run_ops.get_run("r1")) is not None
    finally:
        await reopened.close()


@pytest.mark.parametrize("url", ["memory://x", "memory:///db", "memory://?name=a", "memory://#a"])
def test_memory__anything_after_it_is_refused_naming_the_url(url: str) -> None:
    with pytest.raises(ConfigError, match="invalid memory URL") as caught:
        open_store(url)
    assert repr(url) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file://", "no directory"),
        ("file:relative/dir", "must be absolute"),
        ("file://server/share", "names host 'server'"),
        ("file:///tmp/x?mode=ro", "no '\\?' or '#' part"),
    ],
)
def test_file__a_bad_url_is_refused_naming_it(url: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        open_store(url)
    assert repr(url) in str(caught.value) and "\n" not in str(caught.value)


def test_file__a_regular_file_is_refused_pointing_at_sqlite_urls(tmp_path: Path) -> None:
    existing = tmp_path / "cairn.db"
    existing.write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file, not a directory") as caught:
        open_store(f"file://{existing}")
    assert f"sqlite:///{existing}" in str(caught.value)


def test_describe__says_what_memory_and_file_urls_open(tmp_path: Path) -> None:
    assert "in memory" in locations.describe("memory://", "memory://")
    assert str(tmp_path / "cairn.db") in locations.describe(f"file://{tmp_path}", "x")
    assert locations.describe("sqlite:///cairn.db", "sqlite:///cairn.db") == "sqlite:///cairn.db"


def test_open_store__an_unknown_scheme_lists_every_spelling() -> None:
    with pytest.raises(ConfigError, match="memory://") as caught:
        open_store("mongodb://db/cairn")
    assert "file:///directory" in str(caught.value)


def test_memory__an_old_sqlite_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sqlite3.sqlite_version_info", (3, 31, 1))
    with pytest.raises(ConfigError, match=r"memory:// needs SQLite 3\.36 or newer"):
        open_store("memory://")
