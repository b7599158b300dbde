"""A step whose code calls cairn wrongly fails at its first attempt, with the fix (issue 31).

Retrying the same code cannot make a usage error (`usage` on cairn's error class, or a
call of a cairn function that does not fit its signature) go away; a TypeError of the
user's own code is retried as any error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import cairn
from cairn.steps import http

from .kit import WAIT, Kit

PATIENT = cairn.Retry(max_attempts=5, delay=0, max_delay=0)


def _own_helper(a: int) -> int:
    return a


MISTAKES: dict[str, tuple[Callable[[], Any], str, str]] = {
    "durable primitive in a step": (
        lambda: cairn.sleep("1s"),
        "cairn.errors.NotInRun",
        "cairn.sleep() cannot be called inside step 'usage.step': a step runs once and is "
        "not replayed; call it from the workflow",
    ),
    "wrong call of a primitive": (
        lambda: cairn.current_step("which?"),  # type: ignore[call-arg]
        "cairn.errors.InvalidArguments",
        "wrong call of cairn.current_step: takes 0 positional arguments but 1 was given; "
        "it takes cairn.current_step()",
    ),
    "wrong call of a ready step": (
        lambda: http.get("http://127.0.0.1:9/", timeout=5),
        "cairn.errors.InvalidArguments",
        "wrong call of cairn.steps.http.request: got an unexpected keyword argument "
        "'timeout'; it takes cairn.steps.http.request(method, url, *, headers=None, "
        "params=None, data=None, json_body=None, timeout_ms=10000, retries=None, name=None, "
        "max_body=262144, max_retry_after='10m')",
    ),
    "a bad name": (
        lambda: cairn.set_columns(**{"": 1}),
        "cairn.errors.InvalidName",
        "column name must be a non-empty string, got ''",
    ),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
@pytest.mark.parametrize("sync_step", [False, True], ids=["async-step", "sync-step"])
async def test_usage_error__fails_the_step_at_its_first_attempt(
    kit: Kit, mistake: str, sync_step: bool
) -> None:
    call, error_type, fix = MISTAKES[mistake]
    calls: Counter[str] = Counter()

    def body() -> None:
        calls["step"] += 1
        pending = call()
        if hasattr(pending, "close"):
            pending.close()

    if sync_step:

        @kit.step("usage.step", retries=PATIENT)
        def step() -> None:
            body()
    else:

        @kit.step("usage.step", retries=PATIENT)
        async def step() -> None:
            body()

    @kit.workflow("usage.flow")
    async def flow() -> dict[str, Any]:
        try:
            await step()
        except cairn.StepFailed as failed:
            return {
                "attempts": failed.attempts,
                "type": failed.error_type,
                "message": failed.error_message,
                "fatal": failed.fatal,
            }
        return {}

    async with kit.engine() as engine:
        run = await engine.start(flow)
        failed = await run.result(timeout=WAIT)
    assert calls == {"step": 1}
    assert (failed["attempts"], failed["type"], failed["fatal"]) == (1, error_type, True)
    assert fix in failed["message"]


async def test_usage_error__a_type_error_of_the_users_own_code_is_retried(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("usage.own", retries=cairn.Retry(max_attempts=3, delay=0, max_delay=0))
    async def own() -> int:
        calls["own"] += 1
        return _own_helper(1, 2)  # type: ignore[call-arg]

    @kit.workflow("usage.own_flow")
    async def flow() -> str:
        try:
            await own()
        except cairn.StepFailed as failed:
            return f"{failed.error_type} x{failed.attempts}"
        return "no error"

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "builtins.TypeError x3"
    assert calls == {"own": 3}


def test_usage_error__declared_on_the_error_classes() -> None:
    usage = {
        kind.__name__
        for kind in vars(cairn.errors).values()
        if isinstance(kind, type) and issubclass(kind, cairn.CairnError) and kind.usage
    }
    assert usage == {
        "NotInRun",
        "InvalidName",
        "InvalidArguments",
        "DuplicateSchedule",
        "TransientWorkflow",
        "ConfigError",
    }
    # A wrong call of a cairn function is still a TypeError to code that catches one.
    with pytest.raises(TypeError, match=r"wrong call of cairn\.sleep: got an unexpected"):
        cairn.sleep("1s", nap=True)  # type: ignore[call-overload]
