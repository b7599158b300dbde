"""Failure: retries with backoff, RetryableError, FatalError, StepTimeout, StepFailed, RunFailed."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

import cairn

from .kit import WAIT, Gate, Kit

FAST = cairn.Retry(max_attempts=2, delay=0, max_delay=0)


async def test_retry__backoff_attempts_recorded_with_type_message_traceback(kit: Kit) -> None:
    attempts: list[int] = []

    @kit.step("flaky", retries=cairn.Retry(max_attempts=3, delay="20ms", backoff=2, jitter=0))
    def flaky() -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) < 3:
            raise ValueError(f"boom {len(attempts)}")
        return "ok"

    @kit.workflow("failure.backoff")
    async def backoff() -> str:
        return await flaky()

    async with kit.engine() as engine:
        run = await engine.start(backoff)
        assert await run.result(timeout=WAIT) == "ok"
        failed = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)
    assert attempts == [1, 2, 3]
    assert [(a["key"], a["attempt"], a["error_type"], a["message"]) for a in failed] == [
        ("flaky#1", 1, "builtins.ValueError", "boom 1"),
        ("flaky#1", 2, "builtins.ValueError", "boom 2"),
    ]
    for record in failed:
        assert "Traceback (most recent call last)" in record["traceback"]
        assert f"ValueError: {record['message']}" in record["traceback"]
        assert "in flaky" in record["traceback"]
    waits = [(a["retry_at"] - a["failed_at"]).total_seconds() for a in failed]
    assert waits == pytest.approx([0.02, 0.04], abs=1e-3)  # delay * backoff ** (n - 1)
    assert (entry.status, entry.attempts, entry.result) == ("completed", 3, "ok")
    assert entry.finished_at is not None and entry.finished_at >= failed[-1]["retry_at"]


async def test_retry__retryable_error_retry_after_overrides_the_policy(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("throttled", retries=cairn.Retry(max_attempts=2, delay="1h", max_delay="1h"))
    async def throttled() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise cairn.RetryableError("slow down", retry_after="30ms")
        return len(calls)

    @kit.workflow("failure.retry_after")
    async def retry_after() -> int:
        return await throttled()

    async with kit.engine() as engine:
        run = await engine.start(retry_after)
        assert await run.result(timeout=WAIT) == 2
        [failed] = await engine.control.attempts(run.run_id)
    assert (failed["error_type"], failed["message"]) == ("cairn.errors.RetryableError", "slow down")
    assert (failed["retry_at"] - failed["failed_at"]).total_seconds() == pytest.approx(
        0.03, abs=1e-3
    )


async def test_retry__fatal_error_is_not_retried(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("charge", retries=5)
    async def charge() -> None:
        calls.append(1)
        raise cairn.FatalError("card declined")

    @kit.workflow("failure.fatal")
    async def fatal() -> dict[str, Any]:
        try:
            await charge()
        except cairn.StepFailed as exc:
            return {"attempts": exc.attempts, "fatal": exc.fatal, "type": exc.error_type}
        return {}

    async with kit.engine() as engine:
        run = await engine.start(fatal)
        result = await run.result(timeout=WAIT)
        [entry] = await engine.history(run.run_id)
    assert calls == [1]
    assert result == {"attempts": 1, "fatal": True, "type": "cairn.errors.FatalError"}
    assert entry.status == "failed" and entry.error is not None and entry.error["fatal"] is True


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_step_timeout__attempt_is_retried_per_policy(kit: Kit, kind: str) -> None:
    calls: list[int] = []
    release = threading.Event()

    async def slow_async() -> str:
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(WAIT)  # cancelled by the timeout
        return "fast enough"

    def slow_sync() -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(0.3)  # a thread cannot be cancelled: the retry waits for it
        return "fast enough"

    slow = kit.step("slow", retries=FAST, timeout="50ms")(
        slow_async if kind == "async" else slow_sync
    )

    @kit.workflow("failure.timeout")
    async def timed() -> str:
        return str(await slow())

    try:
        async with kit.engine() as engine:
            run = await engine.start(timed)
            assert await run.result(timeout=WAIT) == "fast enough"
            [failed] = await engine.control.attempts(run.run_id)
    finally:
        release.set()
    assert len(calls) == 2
    assert failed["error_type"] == "cairn.errors.StepTimeout"
    if kind == "async":
        assert failed["message"] == "step 'slow' attempt 1 timed out after 0.05s"
    else:
        assert failed["message"].startswith(
            "step 'slow' attempt 1 timed out after 0.05s and was still running for "
        )


async def test_step_timeout__exhausted_raises_step_timeout(kit: Kit) -> None:
    @kit.step("hang", retries=FAST, timeout=0.02)
    async def hang() -> None:
        await asyncio.sleep(WAIT)

    @kit.workflow("failure.timeout_exhausted")
    async def exhausted() -> list[Any]:
        try:
            await hang()
        except cairn.StepTimeout as exc:
            return [type(exc).__name__, exc.step_name, exc.attempts, exc.error_type]
        return []

    async with kit.engine() as engine:
        run = await engine.start(exhausted)
        assert await run.result(timeout=WAIT) == [
            "StepTimeout",
            "hang",
            2,
            "cairn.errors.StepTimeout",
        ]


async def test_step_failed__attributes(kit: Kit) -> None:
    @kit.step("parse", retries=FAST)
    def parse(text: str) -> int:
        return int(text)

    @kit.workflow("failure.attributes")
    async def attributes() -> dict[str, Any]:
        try:
            await parse("not a number")
        except cairn.StepFailed as exc:
            return {
                "step_name": exc.step_name,
                "attempts": exc.attempts,
                "error_type": exc.error_type,
                "message": exc.message,
                "traceback": exc.traceback,
                "fatal": exc.fatal,
                "str": str(exc),
                "summary": exc.summary,
                "is_cairn": isinstance(exc, cairn.CairnError),
            }
        return {}

    async with kit.engine() as engine:
        run = await engine.start(attributes)
        got = await run.result(timeout=WAIT)
    message = "invalid literal for int() with base 10: 'not a number'"
    assert {k: got[k] for k in ("step_name", "attempts", "error_type", "message", "fatal")} == {
        "step_name": "parse",
        "attempts": 2,
        "error_type": "builtins.ValueError",
        "message": message,
        "fatal": False,
    }
    assert f"ValueError: {message}" in got["traceback"] and "in parse" in got["traceback"]
    assert got["str"] == message  # the step's own error's (a ValueError too)
    assert (
        got["summary"] == f"step 'parse' failed after 2 attempt(s): builtins.ValueError: {message}"
    )
    assert got["is_cairn"] is True


async def test_step_failed__workflow_compensates_and_replay_keeps_the_failure(
    kit: Kit, gate: Gate
) -> None:
    calls: Counter[str] = Counter()

    @kit.step("charge", retries=FAST)
    async def charge(amount: int) -> str:
        calls["charge"] += 1
        raise RuntimeError(f"gateway refused {amount}")

    @kit.step("release_stock")
    def release_stock(item: str) -> str:
        calls["release_stock"] += 1
        return f"released {item}"

    @kit.step("gate")
    async def gate_step() -> str:
        return await gate()

    @kit.workflow("failure.compensation")
    async def order() -> dict[str, Any]:
        try:
            await charge(42)
        except cairn.StepFailed as exc:
            undone = await release_stock("sku-1")
            await gate_step()
            return {"undone": undone, "why": exc.message, "attempts": exc.attempts}
        return {"undone": None}

    first = kit.engine()
    await first.open()
    run = await first.start(order)
    await gate.hold(first)
    async with kit.engine() as second:
        result = await (await second.get(run.run_id)).result(timeout=WAIT)
        history = await second.history(run.run_id)
    assert result == {"undone": "released sku-1", "why": "gateway refused 42", "attempts": 2}
    assert calls == {"charge": 2, "release_stock": 1}  # the replay re-raised the record
    assert [(h.key, h.status) for h in history] == [
        ("charge#1", "failed"),
        ("release_stock#1", "completed"),
        ("gate#1", "completed"),
    ]


async def test_step_failed__uncaught_fails_the_run(kit: Kit) -> None:
    @kit.step("explode", retries=FAST)
    def explode() -> None:
        raise ValueError("no stock for sku-9")

    @kit.workflow("failure.uncaught")
    async def uncaught() -> None:
        await explode()

    async with kit.engine() as engine:
        run = await engine.start(uncaught)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
        assert await run.status() == cairn.RunStatus.FAILED
        [summary] = await engine.list_runs()
    failure = info.value
    assert type(failure) is cairn.RunFailed
    assert failure.run_id == run.run_id
    assert failure.error_type == "builtins.ValueError"
    assert "no stock for sku-9" in failure.error_message and "'explode'" in failure.error_message
    assert "ValueError: no stock for sku-9" in failure.traceback
    assert run.run_id in str(failure) and "\n" not in str(failure)
    assert summary.status == cairn.RunStatus.FAILED
    assert summary.error is not None and summary.error["step"] == "explode"


async def test_workflow_error__fails_the_run_with_its_type(kit: Kit) -> None:
    @kit.workflow("failure.workflow_raises")
    async def raises() -> None:
        raise KeyError("missing-field")

    async with kit.engine() as engine:
        run = await engine.start(raises)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
    assert info.value.error_type == "builtins.KeyError"
    assert "missing-field" in info.value.error_message
    assert "raise KeyError" in info.value.traceback


def test_errors__hierarchy() -> None:
    names = [n for n in cairn.__all__ if isinstance(getattr(cairn, n), type)]
    errors = [getattr(cairn, n) for n in names if issubclass(getattr(cairn, n), BaseException)]
    assert cairn.Cancelled in errors and not issubclass(cairn.Cancelled, Exception)
    assert all(issubclass(e, cairn.CairnError) for e in errors if e is not cairn.Cancelled)
    assert issubclass(cairn.StepTimeout, cairn.StepFailed)
    assert issubclass(cairn.PoisonRun, cairn.RunFailed)
    assert issubclass(cairn.ChildFailed, cairn.RunFailed)
