"""`cairn tasks list` as a table: each task on one line with its whole id, at 80 columns too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.console import Console

from cairn.cli import tasks
from cairn.runtime.tasks import TaskInfo

NOW = datetime(2026, 11, 30, 2, 13, tzinfo=UTC)


def task(task_id: str, title: str, **fields) -> TaskInfo:
    made = {
        "run_id": "01a22a3aefe2fe7ec86d068167a84b5d",
        "name": "review-letter",
        "status": "open",
        "data": None,
        "form": None,
        "assignee": None,
        "created_at": NOW,
        "due_at": None,
        "submitted_at": None,
        "submitted_by": None,
        "values": None,
    }
    made.update(fields)
    return TaskInfo(task_id=task_id, title=title, **made)  # type: ignore[arg-type]


TASKS = [
    task("0e59ef7d0d9e4e7c960942aba2855b78", "Review the letter"),
    task(
        "7c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f",
        "Confirm the recommendation for order o-1043 " * 3,
        assignee="ops",
        due_at=NOW,
    ),
]


def rendered(width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(tasks.tasks_table(TASKS))
    return captured.get().rstrip("\n").splitlines()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_tasks_table__whole_ids_one_line_each(width: int) -> None:
    lines = rendered(width)
    assert len(lines) == 1 + len(TASKS)  # a heading, then one line per task
    assert all(len(line) <= width for line in lines)
    assert lines[0].split()[:2] == ["TASK", "ID"]
    for line, shown in zip(lines[1:], TASKS, strict=True):
        assert line.startswith(shown.task_id + " ")  # whole, to copy into `tasks submit`
        assert shown.name in line and "open" in line


def test_tasks_table__the_run_id_joins_when_there_is_room() -> None:
    assert "RUN ID" not in rendered(80)[0]
    assert all(TASKS[0].run_id in line for line in rendered(200)[1:])
