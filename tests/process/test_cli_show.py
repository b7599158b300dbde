"""`cairn runs show` on a long history: the last entries, and a line about the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.cli.runs import SHOWN

from .test_cli import cairn_cmd, db_args

pytestmark = pytest.mark.process

LONG = SHOWN + 50

FLOWS = """
import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.workflow(name="flows.many")
async def many(n: int) -> int:
    total = 0
    for i in range(n):
        total = await add(total, i)
    return total
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    db = db_args(tmp_path)
    for run_id, steps in (("long", LONG), ("short", 3)):
        proc = cairn_cmd(tmp_path, "run", "flows:many", str(steps), "--run-id", run_id, *db)
        assert proc.returncode == 0, proc.stderr
    return tmp_path


def show(project: Path, *args: str) -> str:
    proc = cairn_cmd(project, "runs", "show", *args, *db_args(project))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def row(text: str, seq: int) -> bool:
    """Whether the history table has entry `seq` (`add#SEQ`, the SEQth step)."""
    return re.search(rf"^\s*{seq}\s+step\s+add#{seq}\s", text, re.MULTILINE) is not None


def seqs(shown: dict[str, object]) -> list[int]:
    history = shown["history"]
    assert isinstance(history, list)
    return [entry["seq"] for entry in history]


def test_show__a_long_history_shows_its_last_entries_and_says_so(project: Path) -> None:
    text = show(project, "long")
    assert f"history (last {SHOWN} of {LONG})" in text
    assert "the first 50 are not shown (--all: every entry, --limit N: the last N)" in text
    assert row(text, LONG) and row(text, 51) and not row(text, 50)

    shown = json.loads(show(project, "long", "--json"))
    assert seqs(shown) == list(range(51, LONG + 1))
    assert shown["history_skipped"] == 50
    assert list(shown) == ["run", "history", "history_skipped", "attempts"]

    assert seqs(json.loads(show(project, "long", "--json", "--limit", "10"))) == list(
        range(LONG - 9, LONG + 1)
    )
    whole = json.loads(show(project, "long", "--json", "--all"))
    assert seqs(whole) == list(range(1, LONG + 1))
    assert "history_skipped" not in whole
    text = show(project, "long", "--all")
    assert f"history ({LONG})" in text and "not shown" not in text


def test_show__a_short_history_prints_as_before(project: Path) -> None:
    text = show(project, "short")
    assert "history (3)" in text and "not shown" not in text
    assert text == show(project, "short", "--all")
    shown = json.loads(show(project, "short", "--json"))
    assert list(shown) == ["run", "history", "attempts"]
    assert seqs(shown) == [1, 2, 3]


def test_show__limit_and_all_are_checked(project: Path) -> None:
    proc = cairn_cmd(project, "runs", "show", "long", "--limit", "0", *db_args(project))
    assert proc.returncode == 1
    assert proc.stderr == "error: --limit must be a positive integer, got 0\n"
    proc = cairn_cmd(project, "runs", "show", "long", "--all", "--limit", "5", *db_args(project))
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr
