"""`Store.open(migrate=False)`: only a database with cairn's current schema opens.

What the commands that only read or steer runs open (cli/options.py): a missing or
foreign database is refused with SchemaMissing, and nothing is created or written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import SchemaTooNew
from cairn.store import migrate, open_store, opened

from .kit import execute


def _nothing_there(url: str) -> bool:
    if url.startswith("sqlite:///"):
        return not Path(url.removeprefix("sqlite:///")).exists()
    rows = execute(
        url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    )
    return bool(rows[0][0] == 0)


async def test_open__without_migrating_refuses_a_database_without_cairn(empty_url: str) -> None:
    with pytest.raises(migrate.SchemaMissing, match="no cairn database at") as caught:
        await open_store(empty_url).open(migrate=False)

    assert caught.value.applied == 0
    assert _nothing_there(empty_url)


async def test_open__without_migrating_names_an_older_schema(empty_url: str) -> None:
    async with opened(empty_url):
        pass
    execute(empty_url, "DELETE FROM cairn_migrations WHERE version > 3")

    with pytest.raises(migrate.SchemaMissing, match="has cairn schema version 3") as caught:
        await open_store(empty_url).open(migrate=False)

    dialect = "sqlite" if empty_url.startswith("sqlite") else "postgres"
    assert caught.value.newest == migrate.available(dialect)[-1].version
    rows = execute(empty_url, "SELECT version FROM cairn_migrations ORDER BY version")
    assert [row[0] for row in rows] == [1, 2, 3]  # not migrated


async def test_open__without_migrating_opens_a_current_one_and_refuses_a_newer(
    empty_url: str,
) -> None:
    async with opened(empty_url):
        pass
    async with opened(empty_url, migrate=False) as store:
        assert store.dialect in ("sqlite", "postgres")
    execute(
        empty_url,
        "INSERT INTO cairn_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (9999, "from_the_future", 0.0),
    )
    with pytest.raises(SchemaTooNew):
        await open_store(empty_url).open(migrate=False)


async def test_open__without_migrating_makes_no_directory(tmp_path: Path) -> None:
    directory = tmp_path / "stroe"
    with pytest.raises(migrate.SchemaMissing, match="does not exist"):
        await open_store(f"file://{directory}").open(migrate=False)
    assert not directory.exists()


async def test_open__in_memory_migrates_all_the_same() -> None:
    async with opened("sqlite:///:memory:", migrate=False) as store:
        assert store.dialect == "sqlite"
