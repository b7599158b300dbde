"""cairn.steps.wait.until: durable polling, parked between polls, one entry in all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.steps import NotYet, WaitTimeout, wait
from engine.kit import WAIT, Kit

from .test_http import until_status


async def parked_after(engine: cairn.Engine, run_id: str, polls: int) -> None:
    """Until the run is parked with `polls` failed polls recorded."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            done = len(await engine.control.attempts(run_id))
            if run.status == "SLEEPING" and done == polls:
                return
            await asyncio.sleep(0.005)


class Answers:
    """A check that answers from a list (the last answer repeated), counting its polls."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.polls = 0

    def __call__(self) -> Any:
        self.polls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_wait__parks_between_polls_and_adds_one_entry(kit: Kit) -> None:
    check = Answers(False, None, {"invoice": "paid"})
    clock = VirtualClock()

    @kit.workflow("wait.invoice")
    async def flow() -> Any:
        return await wait.until(check, every="30s", timeout="5m")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        for poll in (1, 2):
            await parked_after(engine, run.run_id, poll)
            assert check.polls == poll
            # Between polls: parked, and the history has grown by no entry.
            assert await engine.history(run.run_id) == []
            summary = await run.describe()
            assert summary.waiting_for is not None
            assert summary.waiting_for.startswith("retrying 'wait.until' in 30 s")
            clock.advance(30)
        assert await run.result(timeout=WAIT) == {"invoice": "paid"}
        history = await engine.history(run.run_id)
        polls = await engine.control.attempts(run.run_id)
    assert [(h.key, h.status, h.attempts) for h in history] == [("wait.until#1", "completed", 3)]
    assert [(p["error_type"], p["message"]) for p in polls] == [
        ("cairn.steps.errors.NotYet", "poll 1 of 11: check returned False"),
        ("cairn.steps.errors.NotYet", "poll 2 of 11: check returned None"),
    ]
    assert check.polls == 3


async def test_wait__times_out_with_a_clear_error(sqlite_kit: Kit) -> None:
    check = Answers(0)
    clock = VirtualClock()

    @sqlite_kit.workflow("wait.never")
    async def flow() -> str:
        try:
            await wait.until(check, every="30s", timeout="1m", name="wait for stock")
        except WaitTimeout as exc:
            return exc.error_message
        return "in stock"

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        for poll in (1, 2):
            await parked_after(engine, run.run_id, poll)
            clock.advance(30)
        message = await run.result(timeout=WAIT)
        [entry] = await engine.history(run.run_id)
    assert message == "wait.until gave up after 3 poll(s) 30s apart: check returned 0"
    assert (entry.name, entry.status, entry.attempts) == ("wait for stock", "failed", 3)
    assert check.polls == 3


async def test_wait__errors_are_polls_and_fatal_ends_it(sqlite_kit: Kit) -> None:
    flaky = Answers(ConnectionError("down"), 5)
    fatal = Answers(cairn.FatalError("order cancelled"))

    @sqlite_kit.workflow("wait.errors")
    async def flow() -> list[Any]:
        first = await wait.until(flaky, every="100ms", timeout="10s")
        try:
            await wait.until(fatal, every="100ms", timeout="10s")
        except cairn.StepFailed as exc:
            return [first, exc.attempts, exc.error_message]
        return [first]

    async with sqlite_kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == [5, 1, "order cancelled"]
        polls = await engine.control.attempts(run.run_id)
    assert polls[0]["message"] == "poll 1 of 101: check raised ConnectionError: down"


async def test_wait__an_async_check_in_a_sync_workflow(sqlite_kit: Kit) -> None:
    seen: list[int] = []

    async def check() -> int | None:
        seen.append(len(seen))
        return len(seen) if len(seen) >= 2 else None

    @sqlite_kit.workflow("wait.sync")
    def flow() -> Any:
        return wait.until(check, every=0.05, timeout=5)

    async with sqlite_kit.engine() as engine:
        assert await (await engine.start(flow)).result(timeout=WAIT) == 2


async def test_wait__a_restart_between_polls_resumes_them(sqlite_kit: Kit) -> None:
    check = Answers(False, False, "done")
    clock = VirtualClock()

    @sqlite_kit.workflow("wait.restarted")
    async def flow() -> Any:
        return await wait.until(check, every="1m", timeout="10m")

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        await parked_after(engine, run.run_id, 1)
    async with sqlite_kit.engine(clock=clock) as engine:  # another process takes over
        clock.advance(60)
        await parked_after(engine, run.run_id, 2)
        clock.advance(60)
        assert await (await engine.get(run.run_id)).result(timeout=WAIT) == "done"
        polls = await engine.control.attempts(run.run_id)
    assert [p["message"] for p in polls] == [
        "poll 1 of 11: check returned False",
        "poll 2 of 11: check returned False",
    ]


async def test_wait__a_cancel_reaches_a_parked_wait(sqlite_kit: Kit) -> None:
    @sqlite_kit.workflow("wait.cancelled")
    async def flow() -> Any:
        return await wait.until(lambda: False, every="1h", timeout="1d")

    async with sqlite_kit.engine() as engine:
        run = await engine.start(flow)
        await until_status(engine, run.run_id, "SLEEPING")
        await engine.cancel(run.run_id)
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)


async def test_wait__outside_a_run_polls_in_memory() -> None:
    check = Answers(None, None, "ok")
    assert await wait.until(check, every=0.01, timeout=1) == "ok"
    with pytest.raises(WaitTimeout, match=r"gave up after 3 poll\(s\) 0.01s apart"):
        await wait.until(Answers(False), every=0.01, timeout=0.02)
    # Where no event loop runs, the value itself.
    assert await asyncio.to_thread(wait.until, Answers(False, 7), every=0.01, timeout=1) == 7


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: wait.until("ready", every="1s"), "check must be a function"),
        (lambda: wait.until(bool, every=0), "every must be positive"),
        (lambda: wait.until(bool, every="soon"), "wait.until every"),
        (lambda: wait.until(bool, timeout="1 month"), "wait.until timeout"),
    ],
)
def test_wait__bad_arguments_fail_at_the_call(call: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        call()


def test_wait__not_yet_is_retryable() -> None:
    assert issubclass(NotYet, cairn.RetryableError)
    assert issubclass(WaitTimeout, cairn.FatalError)


async def test_wait__with_the_test_engine(sqlite_app: str) -> None:
    from cairn.steps import db
    from cairn.testing import TestEngine

    kit = Kit("")
    check = Answers(None, None, "shipped")

    @kit.workflow("wait.tested")
    async def flow() -> Any:
        state = await wait.until(check, every="1h", timeout="1d")
        await db.update("app", "CREATE TABLE log (state TEXT)")
        await db.update("app", "INSERT INTO log VALUES (?)", [state])
        return await db.query("app", "SELECT state FROM log")

    async with TestEngine(registry=kit.registry, databases={"app": sqlite_app}) as env:
        run = await env.start(flow)
        await env.advance("2h")  # two polls an hour apart, in no time
        assert await run.result(timeout=WAIT) == [{"state": "shipped"}]
    assert check.polls == 3
