"""The psycopg versions the PostgreSQL store accepts, and pyproject's claim of the same."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from cairn.errors import ConfigError
from cairn.store.postgres import driver

ROOT = Path(__file__).resolve().parents[2]


def test_oldest__is_what_pyprojects_postgres_extra_claims() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    claimed = {}
    for requirement in project["optional-dependencies"]["postgres"]:
        name, version = re.fullmatch(r"([\w-]+)(?:\[\w+\])?>=([\d.]+)", requirement).groups()  # type: ignore[union-attr]
        claimed[name.replace("-", "_")] = driver.release(version)
    assert claimed == driver.OLDEST


@pytest.mark.parametrize(
    ("version", "numbers"),
    [("3.2.13", (3, 2, 13)), ("3.3.0.dev1", (3, 3, 0)), ("3.2", (3, 2)), ("3.1rc2", (3, 1))],
)
def test_release__reads_the_leading_numbers(version: str, numbers: tuple[int, ...]) -> None:
    assert driver.release(version) == numbers


def test_unsupported__names_the_package_too_old_in_one_line() -> None:
    problem = driver.unsupported({"psycopg": "3.1.18", "psycopg_pool": "3.2.0"})

    assert problem == (
        "the PostgreSQL store needs psycopg 3.2 or later, found 3.1.18: "
        "pip install --upgrade 'cairn-workflows[postgres]'"
    )
    assert "psycopg_pool 3.2 or later, found 3.1.0" in str(
        driver.unsupported({"psycopg": "3.2.0", "psycopg_pool": "3.1.0"})
    )


@pytest.mark.parametrize("versions", [("3.2.0", "3.2.0"), ("3.3.9", "3.3.3"), ("4.0", "4.0")])
def test_unsupported__accepts_the_oldest_and_later(versions: tuple[str, str]) -> None:
    assert driver.unsupported({"psycopg": versions[0], "psycopg_pool": versions[1]}) is None


def test_check__passes_with_the_installed_driver() -> None:
    driver.check()  # the suite runs on a supported psycopg (3.3, and 3.2 in a second venv)


def test_check__an_unsupported_driver_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setattr(psycopg, "__version__", "3.1.18")
    with pytest.raises(ConfigError, match=r"^the PostgreSQL store needs psycopg 3.2 or later"):
        from cairn.store import open_store

        open_store("postgresql://localhost/nothing")
