"""`cairn runs list` as a table: identity and status always show, long text is cut, at any width."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.console import Console

from cairn.cli import output
from cairn.models import RunStatus, RunSummary

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
LONG_ERROR = {
    "type": "cairn.errors.StepFailed",
    "message": "step 'charge_card' failed after 3 attempt(s): builtins.ConnectionError: "
    "payment gateway timed out after 10s while talking to https://psp.example.com/v1/charges "
    "with a body of several hundred characters " + "x" * 300,
}


def summary(run_id: str, workflow: str, status: RunStatus, **fields) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        workflow=workflow,
        status=status,
        created_at=NOW,
        updated_at=NOW,
        **fields,
    )


RUNS = [
    summary(
        "0193ab4f2c8e7d6a5b4c3d2e1f001122",
        "shop.checkout",
        RunStatus.FAILED,
        columns={"order": "o-1043", "customer": "ken", "note": "n" * 80},
        error=LONG_ERROR,
    ),
    summary(
        "0193ab4f2c8e7d6a5b4c3d2e1f001123",
        "reports.nightly",
        RunStatus.COMPLETED,
        progress={"message": "rendering sections " * 5, "current": 3, "total": 10},
    ),
    summary("order-o-1045", "shop.checkout", RunStatus.WAITING, version="v2"),
    summary(
        "0193ab4f2c8e7d6a5b4c3d2e1f001124",
        "mail.welcome",
        RunStatus.CANCELLED,
        error={"type": "cairn.errors.Cancelled", "message": "cancelled by an operator"},
    ),
]


def rendered(width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(output.runs_table(RUNS))
    return captured.get().splitlines()


@pytest.mark.parametrize("width", [80, 120, 160])
def test_runs_table__ids_workflows_and_statuses_show_on_their_rows(width: int) -> None:
    lines = rendered(width)

    assert lines[0].split()[:3] == ["RUN", "ID", "WORKFLOW"]
    assert "STATUS" in lines[0]
    assert len(lines) == 1 + len(RUNS)  # one line per run: nothing wraps
    for line, run in zip(lines[1:], RUNS, strict=True):
        assert len(line) <= width
        assert line.startswith(run.run_id + " ")
        assert f" {run.workflow} " in line
        assert f" {run.status.value}" in line


@pytest.mark.parametrize("width", [80, 120, 160])
def test_runs_table__a_long_error_is_cut_with_an_ellipsis(width: int) -> None:
    failed = rendered(width)[1]

    assert "step 'charge_card" in failed
    assert failed.rstrip().endswith("…")


def test_runs_table__wide_enough_shows_every_column() -> None:
    header = rendered(240)[0].split()

    for name in ("CREATED", "UPDATED", "COLUMNS", "PROGRESS", "ERROR", "VERSION"):
        assert name in header


def test_runs_table__narrow_keeps_identity_and_status() -> None:
    # Too narrow for a whole id beside the workflow, status and error: each run's id on
    # a line of its own, the rest below it, indented.
    lines = rendered(60)

    assert lines[0] == "RUN ID" and lines[1].split()[:3] == ["WORKFLOW", "STATUS", "ERROR"]
    for first, second, run in zip(lines[2::2], lines[3::2], RUNS, strict=True):
        assert len(first) <= 60 and len(second) <= 60
        assert first == run.run_id
        assert second.startswith("  ") and run.status.value in second
