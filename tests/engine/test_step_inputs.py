"""Steps' inputs and attempts' starts in a run's history, as the dashboard shows them."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.core import step_input

from .kit import WAIT, Kit

FAST = cairn.Retry(max_attempts=3, delay="10ms", backoff=1, jitter=0)


async def test_history__each_step_keeps_what_it_was_called_with(kit: Kit) -> None:
    @kit.step("greet")
    async def greet(name: str, *, when: datetime, loud: bool = False) -> str:
        return f"hi {name}"

    @kit.step("nothing")
    async def nothing() -> None:
        return None

    @kit.workflow("inputs.kept")
    async def kept() -> None:
        names = ["ann"]
        await greet(names[0], when=datetime(2026, 1, 2, tzinfo=UTC))
        await cairn.sleep(0.01)
        await nothing()
        await cairn.run_step("inline", lambda a, b: a + len(b), 2, b=[3])

    async with kit.engine() as engine:
        run = await engine.start(kept)
        await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)

    assert [(entry.key, entry.input) for entry in history] == [
        ("greet#1", {"args": ["ann"], "kwargs": {"when": datetime(2026, 1, 2, tzinfo=UTC)}}),
        ("~sleep#1", None),
        ("nothing#1", {"args": [], "kwargs": {}}),
        ("inline#1", {"args": [2], "kwargs": {"b": [3]}}),
    ]


async def test_history__a_failed_step_keeps_its_input_too(kit: Kit) -> None:
    @kit.step("charge", retries=cairn.Retry(max_attempts=1))
    async def charge(amount: int) -> None:
        raise ValueError(f"declined {amount}")

    @kit.workflow("inputs.failed")
    async def failing() -> None:
        await charge(42)

    async with kit.engine() as engine:
        run = await engine.start(failing)
        with pytest.raises(cairn.RunFailed, match="declined 42"):
            await run.result(timeout=WAIT)
        [entry] = await engine.history(run.run_id)

    assert (entry.status, entry.input) == ("failed", {"args": [42], "kwargs": {}})


async def test_history__arguments_that_cannot_be_serialized_leave_a_marker(kit: Kit) -> None:
    lock = threading.Lock()

    @kit.step("locked")
    async def locked(guard: object, n: int) -> int:
        return n + 1

    @kit.workflow("inputs.unserializable")
    async def unserializable() -> int:
        return await locked(lock, 1)

    async with kit.engine() as engine:
        run = await engine.start(unserializable)
        assert await run.result(timeout=WAIT) == 2  # the step ran all the same
        [entry] = await engine.history(run.run_id)

    assert entry.status == "completed"
    assert set(entry.input) == {"omitted"}
    assert entry.input["omitted"].startswith(
        "cannot serialize the step's args: type '_thread.lock' at [0] is not supported"
    )


async def test_history__an_input_over_the_cap_is_replaced_by_a_marker(kit: Kit) -> None:
    @kit.step("size")
    async def size(text: str) -> int:
        return len(text)

    @kit.workflow("inputs.large")
    async def large() -> list[int]:
        fits = await size("x" * (step_input.MAX_BYTES - 100))
        too_large = await size("é" * (step_input.MAX_BYTES // 2))  # 2 bytes each in UTF-8
        return [fits, too_large]

    async with kit.engine() as engine:
        run = await engine.start(large)
        assert await run.result(timeout=WAIT) == [
            step_input.MAX_BYTES - 100,
            step_input.MAX_BYTES // 2,
        ]
        fits, too_large = await engine.history(run.run_id)

    assert fits.input == {"args": ["x" * (step_input.MAX_BYTES - 100)], "kwargs": {}}
    assert too_large.input == {
        "omitted": "the step's input is 65,540 bytes as JSON, over the 65,536 kept"
    }


async def test_attempts__each_failed_attempt_has_its_own_start_and_duration(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("flaky", retries=FAST)
    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ValueError(f"boom {len(calls)}")
        return "ok"

    @kit.workflow("inputs.attempts")
    async def retried() -> str:
        return await flaky()

    async with kit.engine() as engine:
        run = await engine.start(retried)
        assert await run.result(timeout=WAIT) == "ok"
        failed = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)

    assert [a["attempt"] for a in failed] == [1, 2]
    for attempt in failed:
        assert attempt["started_at"] <= attempt["failed_at"] < attempt["retry_at"]
        span = (attempt["failed_at"] - attempt["started_at"]).total_seconds()
        assert attempt["duration"] == pytest.approx(span, abs=1e-6)
    assert failed[1]["started_at"] >= failed[0]["retry_at"]
    # The entry's own start and end are those of the attempt that succeeded.
    assert entry.started_at is not None and entry.started_at >= failed[1]["retry_at"]
    assert entry.finished_at is not None and entry.finished_at >= entry.started_at


async def test_input__a_hook_token_passed_to_a_step_is_never_stored(kit: Kit) -> None:
    sent: list[str] = []

    @kit.step("notify")
    async def notify(url: str, *, token: str) -> None:
        sent.append(token)

    @kit.workflow("inputs.hook")
    async def hooked() -> Any:
        hook = await cairn.create_hook("approve")
        await notify(f"https://example.com/hooks/{hook.token}", token=hook.token)
        return await hook

    async with kit.engine() as engine:
        run = await engine.start(hooked)
        async with asyncio.timeout(WAIT):  # polled: WAITING once the step has committed
            while (await engine.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.005)
        waiting = await engine.history(run.run_id)
        await engine.resume_hook(sent[0], "ok")
        assert await run.result(timeout=WAIT) == "ok"
        called = await engine.history(run.run_id)  # the hook's entry holds no token now

    for history in (waiting, called):
        [entry] = [entry for entry in history if entry.name == "notify"]
        assert entry.input == {
            "args": ["https://example.com/hooks/[hook token]"],
            "kwargs": {"token": "[hook token]"},
        }
        assert sent[0] not in repr(history)
    stored = execute(kit.url, "SELECT input FROM steps WHERE input IS NOT NULL")
    assert stored and sent[0] not in repr(stored)


async def test_history__a_step_declared_keep_input_false_stores_no_input(kit: Kit) -> None:
    secret = "sk_live_do_not_store"

    @kit.step("call_api", keep_input=False)
    async def call_api(api_key: str, order: int) -> int:
        return order

    @kit.workflow("inputs.secret")
    async def secretive() -> int:
        return await call_api(secret, 7)

    async with kit.engine() as engine:
        run = await engine.start(secretive)
        assert await run.result(timeout=WAIT) == 7
        history = await engine.history(run.run_id)

    [entry] = history
    assert entry.input == {"omitted": "declared keep_input=False"}
    stored = execute(kit.url, "SELECT input FROM steps")
    assert stored and secret not in repr(stored)


def test_keep_input__must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"keep_input of @cairn\.step 'x' must be True or False"):
        cairn.step("x", keep_input="no")(lambda: None)  # type: ignore[arg-type]
