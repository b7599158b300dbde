"""A worker without the key of a run's values hands the run back, on both stores.

A mis-deployed worker (no CAIRN_KEYS), or one still on old keys after a rotation, must
not fail runs it cannot decrypt: it releases them, backs off, and logs the key it lacks
once; a worker with the key then finishes them without running completed steps again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.codecs import Encrypted
from cairn.core.run_values import RunValues

from .kit import Kit
from .seeds import until

K1, K2 = b"\x01" * 32, b"\x02" * 32


def codec(current: str = "k1", **keys: bytes) -> Encrypted:
    return Encrypted(keys or {"k1": K1}, current)


def declare(kit: Kit, ran: list[str]) -> Any:
    @kit.step("keys.once")
    async def once(text: str) -> str:
        ran.append(text)
        return f"done/{text}"

    @kit.workflow("keys.parked")
    async def parked(text: str) -> list[Any]:
        first = await once(text)
        got = await cairn.wait_for_event("go")
        return [first, got]

    return parked


@pytest.mark.parametrize("keyless", [None, "k2"], ids=["no-keys", "other-key"])
async def test_keyless_worker__hands_the_run_back_and_a_keyed_one_finishes_it(
    kit: Kit, keyless: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    parked = declare(kit, ran)
    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(parked, "a")).run_id
        await until(first, run_id, "WAITING")
    async with kit.engine(codec=codec(), workers=0) as sender:
        await sender.send_event(run_id, "go", {"n": 1})  # the run is due now
    wrong = None if keyless is None else codec(keyless, **{keyless: K2})
    caplog.set_level(logging.INFO, logger="cairn")
    async with kit.engine(codec=wrong) as keyless_engine:
        # It claims the run at once (poll 50 ms); given time, it must not spin or fail it.
        await asyncio.sleep(1.0)
        record = await keyless_engine.control.record(run_id)
        assert record.status in ("PENDING", "WAITING", "RUNNING"), record.status
        assert record.error is None
        if record.status == "PENDING":  # what operators see (cairn runs show, dashboard)
            assert record.waiting_for is not None and "key 'k1'" in record.waiting_for
    assert record.status != "FAILED"
    lacking = [r for r in caplog.records if "'k1'" in r.getMessage()]
    assert lacking, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.ERROR for r in lacking)
    assert len(lacking) == 1, [r.getMessage() for r in lacking]  # once per run and key
    assert "CAIRN_KEYS" in lacking[0].getMessage() and run_id in lacking[0].getMessage()
    async with kit.engine(codec=codec()) as keyed:
        result = await (await keyed.get(run_id)).result(timeout=10)
    assert result == ["done/a", {"n": 1}]
    assert ran == ["a"]  # the completed step did not run again


async def test_keyless_step_worker__hands_the_attempt_back_for_one_with_the_key(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @kit.step("keys.render", queue="gpu")
    async def render(frame: int) -> int:
        ran.append(frame)
        return frame * 100

    @kit.workflow("keys.movie")
    async def movie(n: int) -> int:
        return await render(n)

    caplog.set_level(logging.INFO, logger="cairn")
    async with kit.engine(codec=codec()) as cpu:
        run_id = (await cpu.start(movie, 3)).run_id
        await until(cpu, run_id, "WAITING")
        async with kit.engine(step_queues=["gpu"], claim=False):  # no keys
            await asyncio.sleep(1.0)
        assert ran == []
        record = await cpu.control.record(run_id)
        assert record.status == "WAITING", record.status
        lacking = [r for r in caplog.records if "'k1'" in r.getMessage()]
        assert len(lacking) == 1, [r.getMessage() for r in caplog.records]
        assert "keys.render" in lacking[0].getMessage()
        async with kit.engine(codec=codec(), step_queues=["gpu"], claim=False):
            assert await (await cpu.get(run_id)).result(timeout=10) == 300
    assert ran == [3]


async def test_keyless_worker__a_run_an_older_build_failed_so_is_retried_with_the_key(
    kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before the fix a worker without the key ended such runs FAILED ("cannot decrypt");
    # `cairn runs retry` (RunControl.retry) takes them up again, completed steps kept.
    ran: list[str] = []
    parked = declare(kit, ran)
    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(parked, "a")).run_id
        await until(first, run_id, "WAITING")
    async with kit.engine(codec=codec(), workers=0) as sender:
        await sender.send_event(run_id, "go", {"n": 2})
    old = contextlib.nullcontext  # the older build: KeyUnavailable reached the workflow
    monkeypatch.setattr(RunValues, "reading", lambda self: old())
    async with kit.engine() as keyless:
        failed = await until(keyless, run_id, "FAILED")
    assert "cannot deserialize" in str(failed.error) and "'k1'" in str(failed.error)
    monkeypatch.undo()
    async with kit.engine(codec=codec()) as keyed:
        await keyed.retry(run_id)
        assert await (await keyed.get(run_id)).result(timeout=10) == ["done/a", {"n": 2}]
    assert ran == ["a"]


@pytest.mark.parametrize("wait", ["event", "receive"])
async def test_keyless_worker__a_message_under_a_newer_key_hands_the_run_back(
    kit: Kit, wait: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A worker still on old keys after a rotation: the run's arguments open, the message
    # sent by a process on the new key does not.
    ran: list[str] = []

    @kit.step("keys.first")
    async def first(text: str) -> str:
        ran.append(text)
        return text

    @kit.workflow("keys.inbox")
    async def inbox(text: str) -> Any:
        await first(text)
        if wait == "event":
            return await cairn.wait_for_event("go")
        return await cairn.receive("go", max_messages=2)

    caplog.set_level(logging.INFO, logger="cairn")
    async with kit.engine(codec=codec()) as old:
        run_id = (await old.start(inbox, "a")).run_id
        await until(old, run_id, "WAITING")
    async with kit.engine(codec=codec("k2", k1=K1, k2=K2), workers=0) as new:
        await new.send_event(run_id, "go", {"n": 1})
    async with kit.engine(codec=codec()) as old:
        await asyncio.sleep(1.0)
        record = await old.control.record(run_id)
        assert record.status != "FAILED", record.error
    assert [
        r for r in caplog.records if "'k2'" in r.getMessage() and "handed back" in r.getMessage()
    ]
    async with kit.engine(codec=codec("k2", k1=K1, k2=K2)) as new:
        result = await (await new.get(run_id)).result(timeout=10)
    assert result == ({"n": 1} if wait == "event" else [{"n": 1}])
    assert ran == ["a"]


async def test_keyless_worker__a_sync_workflow_catching_exceptions_never_sees_it(kit: Kit) -> None:
    ran: list[int] = []

    @kit.step("keys.sync_step")
    def sync_step(n: int) -> int:
        ran.append(n)
        return n + 1

    @kit.workflow("keys.sync")
    def sync_flow(n: int) -> Any:
        got = sync_step(n)
        try:  # what user code may do: it must not see the missing key
            return [got, cairn.wait_for_event("go")]
        except Exception as exc:
            return f"caught {exc!r}"

    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(sync_flow, 1)).run_id
        await until(first, run_id, "WAITING")
    both = codec("k2", k1=K1, k2=K2)
    async with kit.engine(codec=both, workers=0) as sender:  # the event under the new key
        await sender.send_event(run_id, "go", 7)
    async with kit.engine(codec=codec()) as old_keys:  # opens the arguments, not the event
        await asyncio.sleep(0.5)
        assert (await old_keys.control.record(run_id)).status != "FAILED"
    async with kit.engine(codec=both) as keyed:
        assert await (await keyed.get(run_id)).result(timeout=10) == [2, 7]
    assert ran == [1]


async def test_keyless_worker__a_take_by_id_refuses_a_run_it_handed_back_for_a_while(
    kit: Kit,
) -> None:
    # A Celery worker's engine (polls=False) takes runs by id, as their messages say: a
    # run it handed back for a missing key is refused during the back-off (counted as a
    # refused claim, so the dispatcher publishes it again for another worker), not
    # claimed, replayed and handed back once per message.
    ran: list[str] = []
    parked = declare(kit, ran)
    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(parked, "a")).run_id
        await until(first, run_id, "WAITING")
    async with kit.engine(codec=codec(), workers=0) as sender:
        await sender.send_event(run_id, "go", {"n": 1})
    async with kit.engine(polls=False) as keyless:
        assert keyless.worker is not None
        assert await keyless.worker.take(run_id)  # taken, and handed back
        handed = await until(keyless, run_id, "WAITING")  # parked again: it had woken
        assert not await keyless.worker.take(run_id)
        assert (await keyless.control.record(run_id)).fence == handed.fence  # not claimed
    async with kit.engine(codec=codec()) as keyed:
        assert await (await keyed.get(run_id)).result(timeout=10) == ["done/a", {"n": 1}]


async def test_keyless_step_worker__a_take_by_id_refuses_an_attempt_it_handed_back(
    kit: Kit,
) -> None:
    @kit.step("keys.paint", queue="gpu")
    async def paint(frame: int) -> int:
        return frame * 10

    @kit.workflow("keys.film")
    async def film(n: int) -> int:
        return await paint(n)

    async with kit.engine(codec=codec()) as cpu:
        run_id = (await cpu.start(film, 4)).run_id
        await until(cpu, run_id, "WAITING")
        [(task_id,)] = execute(kit.url, "SELECT task_id FROM step_tasks")
        async with kit.engine(step_queues=["gpu"], claim=False, polls=False) as gpu:
            assert gpu.step_worker is not None
            assert await gpu.step_worker.take(task_id)  # taken, and handed back
            assert not await gpu.step_worker.take(task_id)
        async with kit.engine(codec=codec(), step_queues=["gpu"], claim=False):
            assert await (await cpu.get(run_id)).result(timeout=10) == 40


async def test_keyless_worker__a_hand_back_for_a_key_is_not_counted_as_an_attempt(
    kit: Kit,
) -> None:
    # `attempt` (cairn runs show, the dashboard) counts the attempts that did something:
    # two keyless workers handing the run back must not make the keyed one's attempt 3.
    ran: list[str] = []
    parked = declare(kit, ran)
    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(parked, "a")).run_id
        await until(first, run_id, "WAITING")
    async with kit.engine(codec=codec(), workers=0) as sender:
        await sender.send_event(run_id, "go", {"n": 1})
    for _ in range(2):  # two workers: each hands it back once
        async with kit.engine(polls=False) as keyless:
            assert keyless.worker is not None
            assert await keyless.worker.take(run_id)
            await until(keyless, run_id, "WAITING")  # parked again, as it was when it woke
    async with kit.engine(codec=codec()) as keyed:
        assert await (await keyed.get(run_id)).result(timeout=10) == ["done/a", {"n": 1}]
        record = await keyed.control.record(run_id)
    assert (record.attempt, record.recoveries) == (1, 0)


async def test_keyless_worker__a_woken_run_handed_back_still_shows_its_attempt(
    kit: Kit,
) -> None:
    # Before: waking took no attempt, yet the hand-back took one back, so the run read
    # "attempt 0" (cairn runs show, the API) until the next claim, though it had executed.
    ran: list[str] = []
    parked = declare(kit, ran)
    async with kit.engine(codec=codec()) as first:
        run_id = (await first.start(parked, "a")).run_id
        await until(first, run_id, "WAITING")
        assert (await first.control.record(run_id)).attempt == 1
    async with kit.engine(codec=codec(), workers=0) as sender:
        await sender.send_event(run_id, "go", {"n": 1})  # the run is due now
    for _ in range(2):  # two workers: each hands it back once
        async with kit.engine(polls=False) as keyless:
            assert keyless.worker is not None
            assert await keyless.worker.take(run_id)
            async with asyncio.timeout(10):
                while (record := await keyless.control.record(run_id)).owner is not None:
                    await asyncio.sleep(0.01)
            assert (record.attempt, record.recoveries) == (1, 0)
            assert record.status == "WAITING"  # parked and due, as the claim found it
            [shown] = [r for r in await keyless.list_runs() if r.run_id == run_id]
            assert shown.waiting_for is not None and "key 'k1'" in shown.waiting_for
    async with kit.engine(codec=codec()) as keyed:
        assert await (await keyed.get(run_id)).result(timeout=10) == ["done/a", {"n": 1}]
        record = await keyed.control.record(run_id)
    assert (record.attempt, record.recoveries) == (1, 0)
    assert ran == ["a"]
