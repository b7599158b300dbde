"""The name cairn is published under, and docs that speak to users only."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from cairn.cli import scaffold

ROOT = Path(__file__).resolve().parent.parent
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_distribution_is_cairn_workflows() -> None:
    # `pip install cairn` installs an unrelated project; `cairn-engine` is taken too.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "cairn-workflows"
    assert project["scripts"]["cairn"] == "cairn.cli.main:main"


def test_cairn_init_depends_on_the_published_name() -> None:
    written = tomllib.loads(scaffold.PYPROJECT.format(name="shop", module="workflows", url="x"))
    assert written["project"]["dependencies"] == ["cairn-workflows"]
    assert "pypi.org/project/cairn-workflows/" in scaffold.README


def test_docs_install_the_published_name() -> None:
    wrong = re.compile(r"pip install (?:-U )?['\"]?cairn(?:\[|['\"\s`]|$)")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in USER_DOCS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if wrong.search(line) and "unrelated" not in line  # the warning itself
    ]
    assert found == []


def test_user_docs_do_not_quote_the_internal_contract() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in USER_DOCS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "API.md" in line or "as first specified" in line
    ]
    assert found == []
