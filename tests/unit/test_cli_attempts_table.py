"""`cairn runs show`'s failed attempts at 80 columns and wider, with realistic errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from cairn.cli import output

ENDED = datetime(2026, 11, 30, 5, 45, 12, tzinfo=UTC)
WORKER = "ip-10-0-12-34.eu-west-1.compute.internal:48213:ab12cd34ef56"
MESSAGE = (
    "HTTPSConnectionPool(host='crm.internal.example.com', port=443): Max retries exceeded "
    "with url: /api/v2/users/u-1/preferences (Caused by NewConnectionError('Failed to "
    "establish a new connection: [Errno 111] Connection refused'))\nsecond line\nthird line"
)


def attempt(number: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "key": "fetch_user_data_from_external_crm#1",
        "attempt": number,
        "execution": 1,
        "outcome": "failed",
        "worker": WORKER,
        "error_type": "builtins.ConnectionError",
        "message": MESSAGE,
        "traceback": "Traceback ...",
        "started_at": ENDED - timedelta(seconds=1),
        "failed_at": ENDED + timedelta(seconds=number),
        "duration": 1.0,
        "retry_at": ENDED + timedelta(seconds=number, milliseconds=200),
    }
    row.update(changes)
    return row


ATTEMPTS = [
    attempt(1),
    attempt(2, retry_at=None),
    attempt(3, outcome="interrupted", error_type="", message="", worker="host-b:77:0123"),
]


def shown(width: int) -> list[str]:
    console = Console(width=width, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(output.attempts_table(ATTEMPTS))
    return captured.get().splitlines()


def facts_and_errors(lines: list[str]) -> tuple[list[str], list[str]]:
    """The attempts' fact lines, and each one's error with its indented lines joined."""
    facts: list[str] = []
    errors: list[str] = []
    for line in lines[1:]:
        if not line.startswith(" "):
            facts.append(line)
        elif line.startswith("    "):
            errors[-1] += " " + line.strip()
        else:
            errors.append(line)
    return facts, errors


def test_attempts_table__each_attempt_reads_on_its_lines_at_80_columns() -> None:
    # Before: every cell folded, so each attempt wrapped over 2-4 lines, its error and
    # times broken mid-word.
    lines = shown(80)
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split() == ["KEY", "ATTEMPT", "ENDED", "AT", "WORKER", "RETRY"]
    facts, errors = facts_and_errors(lines)
    assert len(facts) == len(errors) == 3, lines
    for number, line in enumerate(facts, 1):
        assert line.startswith("fetch_user_data_from_external_crm#1"[:10]), line
        assert f" {number}  " in line  # the attempt number
        assert (ENDED + timedelta(seconds=number)).astimezone().strftime("%H:%M:%S") in line
        assert ("ip-10-0-12" if number < 3 else "host-b:77") in line  # the worker
    assert "after 200ms" in facts[0] and "no retry" in facts[1] and "ran again" in facts[2]
    assert errors[0].startswith("  builtins.ConnectionError: HTTPSConnectionPool(host='crm.")
    # The error's first line whole, wrapped at spaces and indented (it was cut at the
    # width, "[Errno 111] Connection refused" and all lost).
    assert (
        errors[0].strip()
        == errors[1].strip()
        == ("builtins.ConnectionError: " + " ".join(MESSAGE.splitlines()[0].split()) + " …")
    )
    assert "second line" not in "\n".join(lines)  # the first line only
    assert errors[2].startswith("  interrupted (worker host-b:77:0123, started ")


def test_attempts_table__a_wide_terminal_puts_the_error_beside_its_facts() -> None:
    lines = shown(400)
    assert lines[0].split()[-1] == "ERROR"
    assert len(lines) == 4, lines  # the header and one line per attempt
    assert WORKER in lines[1] and "2026" in lines[1]
    assert "builtins.ConnectionError: HTTPSConnectionPool(host='crm.internal" in lines[1]
    assert "Connection refused')) …" in lines[1]  # the whole first line, more to come
    # Too narrow for every error whole beside its facts: each goes below them, whole.
    narrower = shown(220)
    assert narrower[0].split()[-1] == "RETRY"
    assert facts_and_errors(narrower)[1][0].endswith("Connection refused')) …")
