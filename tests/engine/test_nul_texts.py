"""Texts from user code that hold NUL: stored faithfully on both stores.

PostgreSQL's TEXT cannot hold U+0000; cairn escapes it at the store boundary
(store/texts.py), so a step whose exception message has one is retried, caught and read
back exactly as on SQLite.
"""

from __future__ import annotations

import asyncio

import pytest

import cairn
from cairn.errors import InvalidName

from .kit import WAIT, Kit

FAST = cairn.Retry(max_attempts=2, delay=0, max_delay=0)


async def test_nul__in_an_error_message_the_step_is_retried_and_the_run_completes(
    kit: Kit,
) -> None:
    calls: list[int] = []

    @kit.step("nul.flaky", retries=FAST)
    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("bad\x00byte")
        return "ok"

    @kit.workflow("nul.retried")
    async def retried() -> str:
        return await flaky()

    async with kit.engine() as engine:
        run = await engine.start(retried)
        assert await run.result(timeout=WAIT) == "ok"
        [failed] = await engine.control.attempts(run.run_id)
    assert len(calls) == 2
    assert (failed["error_type"], failed["message"]) == ("builtins.ValueError", "bad\x00byte")
    assert "ValueError: bad\x00byte" in failed["traceback"]


async def test_nul__a_caught_step_failure_reads_back_what_was_raised(kit: Kit) -> None:
    @kit.step("nul.broken", retries=FAST)
    def broken(text: str) -> str:
        raise ValueError(text)

    @kit.workflow("nul.caught")
    async def caught(text: str) -> dict[str, str]:
        try:
            await broken(text)
        except cairn.StepFailed as failure:
            return {"message": failure.error_message, "traceback": failure.traceback}
        return {}

    text = "bad\x00byte \\x00 \\u0000 \x00"
    async with kit.engine() as engine:
        run = await engine.start(caught, text)
        seen = await run.result(timeout=WAIT)
        attempts = await engine.control.attempts(run.run_id)
    assert seen["message"] == text
    assert f"ValueError: {text}" in seen["traceback"]
    assert [a["message"] for a in attempts] == [text, text]


class Odd(Exception):
    """An exception class whose stored name holds NUL (qualname is free text)."""


Odd.__qualname__ = "Odd\x00one"


async def test_nul__in_an_error_type_name_is_stored_and_read_back(kit: Kit) -> None:
    @kit.step("nul.odd", retries=FAST)
    def odd() -> None:
        raise Odd("x")

    @kit.workflow("nul.odd_type")
    async def odd_type() -> str:
        try:
            await odd()
        except cairn.StepFailed as failure:
            return failure.error_type
        return ""

    async with kit.engine() as engine:
        run = await engine.start(odd_type)
        error_type = await run.result(timeout=WAIT)
        attempts = await engine.control.attempts(run.run_id)
    assert error_type == f"{__name__}.Odd\x00one"
    assert {a["error_type"] for a in attempts} == {error_type}


async def test_nul__in_values_progress_and_columns_round_trips(kit: Kit) -> None:
    text = "a\x00b\x01c"

    @kit.step("nul.echo")
    def echo(value: dict[str, str]) -> dict[str, str]:
        return {"back": value["in"]}

    @kit.workflow("nul.values")
    async def values(given: str) -> dict[str, str]:
        cairn.progress(given)
        cairn.set_columns(note=given)
        return await echo({"in": given})

    async with kit.engine() as engine:
        run = await engine.start(values, text)
        assert await run.result(timeout=WAIT) == {"back": text}
        [entry] = await engine.history(run.run_id)
        stored = await engine.control.record(run.run_id)
    assert entry.result == {"back": text}
    assert stored.args is not None and "\x00" not in stored.args  # JSON escapes it
    assert stored.progress is not None and "\x00" not in stored.progress


async def test_nul__in_a_human_tasks_title_round_trips_and_names_are_refused(kit: Kit) -> None:
    # The title is free text, stored faithfully; the assignee and the submitter (`by`) are
    # names (a task is found by them), so the name rule refuses a NUL there at once.
    who = "ann\x01"

    @kit.workflow("nul.task")
    async def task() -> object:
        return await cairn.human_task("review", title="look\x00here", assignee=who)

    @kit.workflow("nul.assignee")
    async def bad_assignee() -> object:
        return await cairn.human_task("review", title="t", assignee="ann\x00")

    async with kit.engine() as engine:
        run = await engine.start(task)
        async with asyncio.timeout(WAIT):
            while not (mine := await engine.tasks.list(assignee=who)):
                await asyncio.sleep(0.01)
        [info] = mine
        assert (info.title, info.assignee) == ("look\x00here", who)
        with pytest.raises(InvalidName, match="by 'ann\\\\x00' contains a NUL"):
            await engine.tasks.submit(info.task_id, {"ok": True}, by="ann\x00")
        done = await engine.tasks.submit(info.task_id, {"ok": True}, by=who)
        assert done.submitted_by == who
        assert await run.result(timeout=WAIT) == {"ok": True}
        refused = await engine.start(bad_assignee)
        with pytest.raises(cairn.RunFailed, match="assignee 'ann\\\\x00' contains a NUL"):
            await refused.result(timeout=WAIT)
