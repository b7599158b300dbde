"""Where the step library's databases and tag provider come from: arguments, pyproject."""

from __future__ import annotations

from pathlib import Path

import pytest

import cairn
from cairn import config


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder as the current directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "pyproject.toml"


def test_resources__pyproject_then_arguments(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.write_text(
        "[tool.cairn.databases]\n"
        'app = "postgresql://app@db/app"\n'
        'reports = "env:REPORTS_URL"\n'
        "[tool.cairn.tags]\n"
        'provider = "opcua://plc:4840"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("REPORTS_URL", "sqlite:///reports.db")
    found = config.resources()
    assert dict(found.databases) == {
        "app": "postgresql://app@db/app",
        "reports": "sqlite:///reports.db",
    }
    assert found.tags == "opcua://plc:4840"
    given = config.resources({"app": "sqlite:///app.db", "extra": "sqlite:///x.db"}, "opcua://b")
    assert dict(given.databases) == {
        "app": "sqlite:///app.db",
        "reports": "sqlite:///reports.db",
        "extra": "sqlite:///x.db",
    }
    assert given.tags == "opcua://b"


def test_resources__none_set(project: Path) -> None:
    assert config.resources() == config.Resources({}, None)


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('[tool.cairn]\ndatabases = "x"\n', r"\[tool.cairn.databases\] must be a table"),
        ("[tool.cairn.databases]\napp = 5\n", r"\[tool.cairn.databases\] app must be a URL string"),
        ('[tool.cairn.databases]\napp = "env:NOT_SET_ANYWHERE"\n', r"\$NOT_SET_ANYWHERE"),
        ('[tool.cairn]\ntags = "opcua://x"\n', r"\[tool.cairn.tags\] must be a table"),
        ("[tool.cairn.tags]\nprovider = 1\n", r"provider must be a string"),
    ],
)
def test_resources__bad_pyproject(project: Path, toml: str, error: str) -> None:
    project.write_text(toml, encoding="utf-8")
    with pytest.raises(cairn.ConfigError, match=error):
        config.resources()
    with pytest.raises(cairn.ConfigError, match=error):
        cairn.Engine("sqlite:///:memory:")  # found when the engine is made


@pytest.mark.parametrize(
    ("databases", "error"),
    [
        (["app"], "databases must be a dict of name -> URL"),
        ({"": "sqlite:///x.db"}, "a database name must be a non-empty string"),
        ({"app": None}, "database 'app' has no URL"),
        ({"app": "env:NOT_SET_ANYWHERE"}, r"database 'app' is read from \$NOT_SET_ANYWHERE"),
    ],
)
def test_resources__bad_arguments(project: Path, databases: object, error: str) -> None:
    with pytest.raises(cairn.ConfigError, match=error):
        cairn.Engine("sqlite:///:memory:", databases=databases)  # type: ignore[arg-type]
