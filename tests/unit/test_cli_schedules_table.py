"""`cairn schedules list` as a table: the id, workflow, state and next tick always show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from cairn.cli import schedules
from cairn.runtime.schedules import ScheduleInfo

NOW = datetime(2026, 11, 29, 19, 36, tzinfo=UTC)


def info(id: str, workflow: str, **fields: object) -> ScheduleInfo:
    values: dict[str, object] = {
        "id": id,
        "workflow": workflow,
        "cron": None,
        "every": timedelta(seconds=1),
        "tz": "UTC",
        "overlap": "allow",
        "catchup": timedelta(hours=1),
        "args": (),
        "kwargs": {},
        "paused": False,
        "next_tick": NOW,
        "buffered_tick": None,
        "last_run_id": f"sched:{id}:2026-11-29T19:35:59Z",
        "source": "code",
        "created_at": NOW,
        "updated_at": NOW,
    }
    values.update(fields)
    return ScheduleInfo(**values)  # type: ignore[arg-type]


SCHEDULES = [
    info("cron", "soak.cron", cron="*/2 * * * *", every=None, tz="Europe/Berlin"),
    info("every", "soak.every"),
    info("reports.nightly.eu-central", "reports.nightly", paused=True, source="api"),
]


def rendered(width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(schedules.schedules_table(SCHEDULES))
    return captured.get().splitlines()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_schedules_table__ids_workflows_states_and_next_ticks_show_whole(width: int) -> None:
    lines = rendered(width)
    assert len(lines) == 1 + len(SCHEDULES)  # one line per schedule
    assert all(len(line) <= width for line in lines)
    assert lines[0].split()[:2] == ["ID", "WORKFLOW"]
    for line, schedule in zip(lines[1:], SCHEDULES, strict=True):
        assert line.split()[:2] == [schedule.id, schedule.workflow]
        assert ("paused" if schedule.paused else "active") in line
        if not schedule.paused:
            assert "2026-11-29 19:36:00" in line


def test_schedules_table__a_wide_console_shows_every_column_whole() -> None:
    lines = rendered(200)
    for heading in ("WHEN", "OVERLAP", "STATE", "NEXT TICK", "LAST RUN", "SOURCE"):
        assert heading in lines[0]
    assert "cron */2 * * * * (Europe/Berlin)" in lines[1]
    assert "sched:cron:2026-11-29T19:35:59Z" in lines[1]
    assert "…" not in "\n".join(lines)
