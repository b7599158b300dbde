"""Bad input to the CLI, as a new operator types it: one line naming the culprit, no traceback.

Each case here printed a Python traceback, or several lines, before it was fixed.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from tests.conftest import _admin_url, require_postgres

from .test_cli import cairn_cmd, one_error_line

pytestmark = pytest.mark.process

FLOWS = """
import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.workflow(name="flows.total")
async def total(a: int, b: int) -> int:
    return await add(a, b)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def test_runs_show_download__an_unwritable_output_is_one_line(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    assert cairn_cmd(project, "run", "flows:total", "1", "2", "--run-id", "r1", *db).returncode == 0
    missing = project / "no" / "such" / "dir" / "result.json"
    for target, why in ((missing, "No such file or directory"), (project, "Is a directory")):
        proc = cairn_cmd(
            project, "runs", "show", "r1", "--download", "result", "-o", str(target), *db
        )
        assert proc.returncode == 1
        assert one_error_line(proc) == f"error: --output '{target}': cannot write it ({why})"
    assert not missing.parent.exists()


def test_init__a_directory_it_cannot_create_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "project"  # under a file: no directory can be made
    proc = cairn_cmd(tmp_path, "init", str(target))
    assert proc.returncode == 1
    assert one_error_line(proc) == f"error: cannot create directory '{target}': Not a directory"


@pytest.mark.parametrize("command", [["runs", "list"], ["run", "flows:total", "1", "2"]])
def test_postgres__a_database_that_does_not_exist_is_one_line(
    project: Path, command: list[str]
) -> None:
    # psycopg_pool logged "error connecting in 'cairn': ..." three times above it.
    require_postgres()
    url = _admin_url(f"cairn_missing_{uuid.uuid4().hex[:12]}")
    proc = cairn_cmd(project, *command, "--db", url)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line.startswith(f"error: cannot open database {url}: ")
    assert line.endswith("does not exist")


def test_run__a_file_path_for_a_module_says_to_name_the_module(project: Path) -> None:
    # A new operator's first try: the file they just wrote.
    for target, name, example in (
        ("flows.py:total", "flows.py", ", e.g. 'flows'"),
        ("./flows.py:total", "./flows.py", ", e.g. 'flows'"),
        ("/abs/flows.py:total", "/abs/flows.py", ""),
    ):
        proc = cairn_cmd(project, "run", target, "1", "2", "--db", "memory://")
        assert proc.returncode == 1
        line = one_error_line(proc)
        assert line.startswith(f"error: cannot import module '{name}': ")
        assert line.endswith(f" (name the module as Python imports it{example}, not a file)")


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["worker", "--lease", "soon"], "--lease", "soon"),
        (["worker", "--grace", "soon"], "--grace", "soon"),
        (["schedules", "create", "s1", "flows.total", "--every", "soon"], "--every", "soon"),
        (
            ["schedules", "create", "s1", "flows.total", "--every", "1m", "--catchup", "forever"],
            "--catchup",
            "forever",
        ),
    ],
)
def test_bad_durations__name_the_option_as_typed(
    project: Path, args: list[str], option: str, value: str
) -> None:
    # They said "invalid duration for lease", "... for every of schedule 's1'".
    proc = cairn_cmd(project, *args, "--db", f"sqlite:///{project / 'cairn.db'}")
    assert proc.returncode == 1
    assert one_error_line(proc).startswith(f"error: invalid duration for {option}: '{value}' (")
    assert not (project / "cairn.db").exists()  # refused before the database is opened
