"""The CLI as an operator sees it at COLUMNS=80, on both stores, as real subprocesses.

Each test names what an 80-column terminal broke before: an id folded mid-word, a
traceback's long lines wrapped back to the first column, a column dropped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .test_cli import _env, cairn_cmd, one_error_line

pytestmark = pytest.mark.process

RUN_ID = "order-o-1001-abcdef-very-long-order-identifier-0001-attempt-2026-11-30"
ORDER = "o-1001-abcdef-very-long-order-identifier-0001"

FLOWS = """
import cairn


@cairn.step()
async def add(a, b):
    return a + b


@cairn.step(retries=1)
async def explode(order_number_that_is_fairly_long):
    raise ValueError("payment provider rejected the charge for order " + order_number_that_is_fairly_long + " because the card was declined by the issuing bank with code 51 insufficient funds")


TRIES = []


@cairn.step(max_retries=2, retry_delay=0.01)
async def wobble(order_number_that_is_fairly_long):
    TRIES.append(1)
    if len(TRIES) < 3:
        raise ValueError("the carrier's label service timed out for order " + order_number_that_is_fairly_long + " after 30 seconds; it answers again within a minute")
    return "labelled"


@cairn.workflow(name="ship")
async def ship(order: str) -> str:
    return await wobble(order)


@cairn.workflow(name="relay")
async def relay(n: int) -> int:
    if n < 1:
        cairn.continue_as_new(n + 1)
    return n


@cairn.workflow(name="exchange.workflows.order_fulfilment.process_order_with_retries")
async def broken(order: str) -> None:
    await add(1, 2)
    await explode(order)
"""  # noqa: E501 (the raises' lines are long on purpose)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "flows.py").write_text(FLOWS)
    return tmp_path


def at_80(project: Path, *args: str) -> str:
    env = _env()
    env["COLUMNS"] = "80"
    proc = cairn_cmd(project, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_runs_show__facts_and_traceback_wrap_indented_with_ids_whole(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    proc = cairn_cmd(project, "run", "flows:broken", ORDER, "--run-id", RUN_ID, *db)
    assert proc.returncode == 1, proc.stderr
    lines = at_80(project, "runs", "show", RUN_ID, *db).splitlines()

    # The run id on one line, whole, though wider than the value column: it was folded
    # as `...-2026-11` and `-30` on the next line.
    assert f"run id       {RUN_ID}" in lines
    facts = lines[: lines.index("")]
    # Every other fact fits, and a wrapped value continues under itself.
    assert all(len(line) <= 80 for line in facts if not line.startswith("run id")), facts
    error = next(i for i, line in enumerate(facts) if line.startswith("error "))
    assert facts[error].startswith("error        step 'explode' failed after 1 attempt(s): ")
    continued = []
    for line in facts[error + 1 :]:
        if not line.startswith(" " * 13):
            break
        continued.append(line.strip())
    whole = " ".join([facts[error][13:].strip(), *continued])
    assert f"order {ORDER} because the card was declined" in whole
    assert whole.endswith("with code 51 insufficient funds")
    assert not any(line.rstrip() != line for line in facts)  # no padding to the width

    # The traceback: long lines go on indented past the line they continue, not at column 0.
    tb = lines[lines.index("traceback") + 1 :]
    assert tb[0] == "Traceback (most recent call last):"
    # A word no line holds (tmp_path's long path) stays whole, on its line with `File`.
    assert all(len(line) <= 80 or f'File "{project}' in line for line in tb), tb
    last = next(i for i, line in enumerate(tb) if line.startswith("ValueError: "))
    assert tb[last + 1].startswith("    ") and ORDER in " ".join(tb[last:])
    raised = next(i for i, line in enumerate(tb) if line.startswith("    raise ValueError("))
    assert tb[raised + 1].startswith("        order_number_that_is_fairly_long")

    # The attempt's error, indented under its facts: the run's error, whole above, so
    # named by its type (it was printed whole again for each attempt, after a cut `…`).
    attempts = lines[lines.index("failed attempts (1)") :]
    assert re.match(r"explode#1\s+1\s", attempts[2]), attempts
    assert attempts[3] == "  builtins.ValueError (the error above)"
    assert " ".join(lines).count("by the issuing bank") == 2  # the error's, the traceback's


SCHEDULE = "nightly-settlement-report-for-all-european-merchant-accounts-v2"


def test_schedules_list__a_long_id_keeps_the_next_tick_and_its_whole_id(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    for schedule_id in (SCHEDULE, "s2"):
        every = ["--every", "15m"]
        proc = cairn_cmd(
            project, "schedules", "create", schedule_id, "flows.x", *every, *db, "--allow-unknown"
        )
        assert proc.returncode == 0, proc.stderr
        # One line however long (it broke before the first tick's time).
        assert proc.stdout.startswith(f"schedule {schedule_id} created: every 15m, first tick ")
        assert len(proc.stdout.splitlines()) == 1
    lines = at_80(project, "schedules", "list", *db).splitlines()
    # The id is what pause, resume and delete take: whole on a line of its own, and the
    # NEXT TICK (dropped before, the state cut to `acti…`) on the line below it.
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0] == "ID" and "  STATE   NEXT TICK" in lines[1], lines
    row = lines.index(SCHEDULE)
    assert lines[row + 1].startswith("  flows.x   every 15m  skip     active  2026-"), lines


def test_runs_list__long_ids_and_names_keep_the_error_and_whole_ids(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    assert cairn_cmd(project, "run", "flows:broken", ORDER, "--run-id", RUN_ID, *db).returncode
    assert cairn_cmd(project, "run", "flows:broken", "o-2", "--run-id", "r-2", *db).returncode
    lines = at_80(project, "runs", "list", *db).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    # ERROR was dropped for the long workflow name, and the id cut to `order-o-10…`.
    assert lines[0] == "RUN ID" and lines[1].split()[:2] == ["WORKFLOW", "STATUS"]
    assert "ERROR" in lines[1]
    assert lines[2::2] == ["r-2", RUN_ID]
    for line in lines[3::2]:
        assert re.match(r"  excha\S*…\S*_retries\s+FAILED\s", line), line
        assert "step 'explode' fail" in line
    # Short ids: one line a run, with the error.
    ids = at_80(project, "runs", "list", "--prefix", "r-", *db).splitlines()
    assert ids[0].split() == ["RUN", "ID", "WORKFLOW", "STATUS", "ERROR"], ids
    assert ids[1].startswith("r-2  ") and "FAILED  step 'explode' fail" in ids[1]


def test_runs_list__no_trailing_spaces_and_a_continued_run_names_its_new_run(
    project: Path, store_url: str
) -> None:
    db = ["--db", store_url]
    assert cairn_cmd(project, "run", "flows:broken", "o-3", "--run-id", "c-0", *db).returncode
    proc = cairn_cmd(project, "run", "flows:relay", "0", "--run-id", "c-1", *db)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(at_80(project, "runs", "list", "--prefix", "c-1", "--json", *db))
    (new,) = [run["continued_to"] for run in listed["runs"] if run["run_id"] == "c-1"]
    for chosen in (["--prefix", "c-"], []):  # one line a run, and stacked (a long id)
        lines = at_80(project, "runs", "list", *chosen, *db).splitlines()
        # Rich padded each line to the last column's width: 80 columns of trailing spaces.
        assert all(line == line.rstrip() for line in lines), [repr(line) for line in lines]
    # The CONTINUED row names the run it went on as, as `runs show` and the dashboard do:
    # whole, on a line of its own (beside the status, it left no room for the error).
    rows = at_80(project, "runs", "list", "--prefix", "c-", *db).splitlines()
    row = next(i for i, line in enumerate(rows) if line.startswith("c-1 "))
    assert rows[row].split()[-1] == "CONTINUED", rows
    assert rows[row + 1] == f"  continued as new: {new}", rows
    assert rows[row + 2].startswith("c-0 ") and "step 'explode' fail" in rows[row + 2], rows


def test_runs_list__a_bad_cursor_names_the_option_and_what_to_pass(
    project: Path, store_url: str
) -> None:
    for cursor in ("garbage", "1.5|", "x|run"):
        proc = cairn_cmd(project, "runs", "list", "--cursor", cursor, "--db", store_url)
        assert proc.returncode == 1
        assert one_error_line(proc) == (
            f"error: invalid --cursor '{cursor}': pass the value the previous page printed "
            "(`more runs: add --cursor ...` on stderr, or `next_cursor` with --json)"
        )


REVIEW = """
import cairn


@cairn.workflow(name="review.flow")
async def flow(order: str) -> dict:
    return await cairn.human_task(
        "approve",
        title="Approve the refund of order " + order
        + " [bold]for a customer who asked twice[/bold]",
        data={"order": order, "reason": "the parcel arrived damaged, photographs of every side"},
    )
"""


def test_tasks_show__facts_wrap_under_themselves_and_markup_is_text(
    project: Path, store_url: str
) -> None:
    (project / "review.py").write_text(REVIEW)
    db = ["--db", store_url]
    proc = cairn_cmd(project, "run", "review:flow", ORDER, "--run-id", RUN_ID, *db)
    assert proc.returncode == 0, proc.stderr
    task_id = re.search(r"cairn tasks show (\w+)", proc.stderr)
    assert task_id is not None, proc.stderr
    lines = at_80(project, "tasks", "show", task_id[1], *db).splitlines()
    assert f"run       {RUN_ID}" in lines  # whole on its line, not folded
    title = lines.index(next(line for line in lines if line.startswith("title ")))
    text = " ".join(line.strip() for line in lines[title : title + 3])
    # `[bold]` was taken as markup: dropped, and the rest printed bold.
    assert (
        f"Approve the refund of order {ORDER} [bold]for a customer who asked twice[/bold]" in text
    )
    assert lines[title + 1].startswith(" " * 10) and len(lines[title]) <= 80


def test_run__a_progress_line_that_cuts_an_error_is_followed_by_it_whole_once(
    project: Path, store_url: str
) -> None:
    # Two attempts fail with a long error, the third succeeds: no final line says the
    # error, and the progress lines cut it at 80 columns (`payment…`), so it was lost.
    env = {**_env(), "COLUMNS": "80"}
    proc = cairn_cmd(project, "run", "flows:ship", ORDER, "--db", store_url, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()[1:]  # after "run ID of ship started"
    assert all(len(line) <= 80 for line in lines), lines
    cut = [i for i, line in enumerate(lines) if "attempt" in line and "…" in line]
    assert len(cut) == 2, lines
    whole = "builtins.ValueError: the carrier's label service timed out for order "
    whole += f"{ORDER} after 30 seconds; it answers again within a minute"
    # Whole once, wrapped and indented right under the first line that cut it.
    after = lines[cut[0] + 1 : cut[1]]
    assert all(line.startswith(" " * 10) for line in after), lines
    assert " ".join(line.strip() for line in after) == whole
    assert " ".join(proc.stderr.split()).count(whole) == 1
