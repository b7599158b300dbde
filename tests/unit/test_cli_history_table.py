"""`cairn runs show`'s history with long step names, as Cloudflare-style flows name steps."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from cairn.cli import fit, output
from cairn.models import HistoryEntry

NOW = datetime(2026, 11, 30, 2, 18, tzinfo=UTC)
NAMES = [
    "get first cutest cat from KV",
    "get second cutest cat from KV",
    "choose a random cat from the list and download it",
]


def entry(seq: int, name: str) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        kind="step",
        name=name,
        status="completed",
        attempts=1,
        started_at=NOW,
        finished_at=NOW,
        result=f"https://http.cat/{200 + seq}",
        key=f"{name}#1",
    )


def test_history_table__long_step_names_leave_room_for_the_outcome() -> None:
    console = Console(width=80, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(output.history_table([entry(i, n) for i, n in enumerate(NAMES, 1)]))
    lines = captured.get().splitlines()

    assert "OUTCOME" in lines[0]
    assert all(len(line) <= 80 for line in lines)
    for seq, line in enumerate(lines[1:], 1):
        assert f"https://http.cat/{200 + seq}" in line, lines  # what each step returned
    assert "get first cutest cat from KV#1" in lines[1]  # a name within the ample shows whole


def test_fit__an_always_shown_column_waits_at_its_ample_width_for_the_others() -> None:
    wants = [fit.Want("KEY", 60, 12, 0, 28), fit.Want("OUTCOME", 30, 12, 1, 30)]
    assert fit.fit(wants, 80) == {"KEY": 48, "OUTCOME": 30}
    assert fit.fit(wants, 50) == {"KEY": 28, "OUTCOME": 20}
    assert fit.fit(wants, 200) == {"KEY": 60, "OUTCOME": 30}
