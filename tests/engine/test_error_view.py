"""A run's stored error as `cairn runs show` prints it: short, and the user's own frames.

A cancelled run says in one line where it stopped (its traceback only with --traceback);
a failed run's traceback shows the frames of the user's code, not cairn's. Printed by the
real `cairn` command at 80 columns, on both stores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cairn

from .kit import WAIT, Kit

CAIRN_SRC = str(Path(cairn.__file__).resolve().parent) + os.sep


def show(url: str, run_id: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(COLUMNS="80", PYTHONPATH=str(Path(CAIRN_SRC).parent))
    proc = subprocess.run(
        [sys.executable, "-m", "cairn", "runs", "show", run_id, "--db", url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80, proc.stdout
    return proc.stdout


def frames(traceback: str) -> list[str]:
    return [line for line in traceback.splitlines() if line.lstrip().startswith('File "')]


def fact(text: str, name: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(name + "  ")]
    return line[len(name) :].strip()


async def test_a_cancelled_run_is_one_line_with_where_it_stopped(kit: Kit) -> None:
    @kit.step("warm_up")
    async def warm_up() -> int:
        return 1

    @kit.workflow("view.cancelled")
    async def napping() -> None:
        await warm_up()
        await cairn.sleep("1h")

    async with kit.engine() as engine:
        run = await engine.start(napping)
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        stored = json.loads((await engine.control.record(run.run_id)).error or "{}")

    assert stored["at"] == "~sleep#1"
    # What is stored of the traceback is the workflow's line, none of cairn's frames.
    assert frames(stored["traceback"]) and not any(
        CAIRN_SRC in line for line in frames(stored["traceback"])
    )
    text = show(kit.url, run.run_id)
    assert fact(text, "error") == "cancelled, in a sleep (~sleep#1)"
    assert "traceback" not in text and "Traceback" not in text
    assert len(text.splitlines()) < 30, text
    whole = show(kit.url, run.run_id, "--traceback")
    assert "Traceback (most recent call last)" in whole and "await cairn.sleep" in whole


async def test_a_failed_run_shows_the_users_frames_not_cairns(kit: Kit) -> None:
    @kit.step("parse", retries=1)
    async def parse(text: str) -> int:
        return int(text)

    @kit.workflow("view.failed_step")
    async def failing_step() -> int:
        return await parse("not a number")

    @kit.workflow("view.failed_body")
    async def failing_body() -> int:
        raise LookupError("no such order")

    async with kit.engine() as engine:
        in_step = await engine.start(failing_step)
        in_body = await engine.start(failing_body)
        for run in (in_step, in_body):
            with pytest.raises(cairn.RunFailed):
                await run.result(timeout=WAIT)
        attempts = await engine.control.attempts(in_step.run_id)
        body_error = json.loads((await engine.control.record(in_body.run_id)).error or "{}")

    [attempt] = attempts
    for traceback in (attempt["traceback"], body_error["traceback"]):
        shown = frames(traceback)
        assert shown and all(__file__ in line for line in shown), traceback
    assert "return int(text)" in attempt["traceback"]
    assert "ValueError: invalid literal" in attempt["traceback"]

    text = show(kit.url, in_body.run_id)
    assert fact(text, "error") == "builtins.LookupError: no such order"
    assert 'raise LookupError("no such order")' in text
    assert CAIRN_SRC not in text
    text = show(kit.url, in_step.run_id)
    assert "return int(text)" in text and CAIRN_SRC not in text
