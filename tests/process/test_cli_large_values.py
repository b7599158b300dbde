"""`cairn runs show` of an offloaded value: size, hash and preview; --download gives it whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli import cairn_cmd, db_args, one_error_line

pytestmark = pytest.mark.process

SIZE = 400_000  # characters: over the default inline_limit (256 KiB)

FLOWS = """
import cairn


@cairn.step()
def produce(n: int) -> str:
    return "x" * n


@cairn.workflow(name="flows.big")
async def big(n: int) -> int:
    return len(await produce(n))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    proc = cairn_cmd(tmp_path, "run", "flows:big", str(SIZE), "--run-id", "big", *db_args(tmp_path))
    assert proc.returncode == 0, proc.stderr
    return tmp_path


def show(project: Path, *args: str) -> str:
    proc = cairn_cmd(project, "runs", "show", "big", *args, *db_args(project))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_large_values__show_says_size_and_hash_and_download_gives_it_whole(
    project: Path,
) -> None:
    assert "offloaded 390.6 KiB sha256:" in show(project)
    [entry] = json.loads(show(project, "--json"))["history"]
    offloaded = entry["result"]["offloaded"]
    assert offloaded["size"] == SIZE + 2 and offloaded["preview"].startswith('"xxx')
    whole = show(project, "--download", "produce#1")
    assert json.loads(whole) == "x" * SIZE
    show(project, "--download", "produce#1", "-o", "value.json")
    assert json.loads((project / "value.json").read_text()) == "x" * SIZE
    assert show(project, "--download", "result").strip() == str(SIZE)  # an inline one too


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--download", "nope#1"], "run 'big' has no history entry 'nope#1'"),
        (["-o", "x.json"], "--output goes with --download VALUE"),
    ],
)
def test_cli_large_values__bad_downloads_are_one_line(
    project: Path, args: list[str], message: str
) -> None:
    proc = cairn_cmd(project, "runs", "show", "big", *args, *db_args(project))
    assert proc.returncode != 0
    assert message in one_error_line(proc)


def test_cli_large_values__a_missing_blob_is_named_by_download(project: Path) -> None:
    [blob] = project.glob("*.blobs/*/*")
    blob.unlink()
    assert "missing blob: offloaded 390.6 KiB" in show(project)
    proc = cairn_cmd(project, "runs", "show", "big", "--download", "produce#1", *db_args(project))
    assert proc.returncode != 0
    assert f"blob {blob.name}" in one_error_line(proc) and "missing" in one_error_line(proc)
