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
import cairn.durations
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
    # cairn's own checks of the values given to its functions: one helper each (the
    # duration parser, the milliseconds check...), raising a usage error that is still a
    # ValueError (or TypeError) to code that catches one.
    "a bad duration": (
        lambda: http.get("http://127.0.0.1:9/", max_retry_after="soon"),
        "cairn.errors.InvalidValue",
        "invalid duration for http.request max_retry_after: 'soon' (use e.g.",
    ),
    "a bad timeout": (
        lambda: http.get("http://127.0.0.1:9/", timeout_ms="soon"),
        "cairn.errors.InvalidValue",
        "http.request timeout_ms must be a positive number of milliseconds, got 'soon'",
    ),
    "a value of the wrong type": (
        lambda: http.get("http://127.0.0.1:9/", headers=["x"]),
        "cairn.errors.InvalidArguments",
        "http.request: headers must be a dict, got ['x']",
    ),
    "a bad retry policy": (
        lambda: cairn.Retry(max_attempts=0),
        "cairn.errors.InvalidValue",
        "invalid Retry max_attempts: 0 (must be an int >= 1)",
    ),
    "a column value no JSON holds": (
        lambda: cairn.set_columns(order=object()),
        "cairn.errors.InvalidValue",
        "column 'order' must be a JSON value",
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


async def test_usage_error__a_value_error_of_the_users_own_code_is_retried(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("usage.own_value", retries=cairn.Retry(max_attempts=3, delay=0, max_delay=0))
    async def own() -> int:
        calls["own"] += 1
        return int("soon")  # a ValueError of the user's own, as an outage of theirs may be

    @kit.workflow("usage.own_value_flow")
    async def flow() -> str:
        try:
            await own()
        except ValueError as failed:
            assert isinstance(failed, cairn.StepFailed)
            return f"{failed.error_type} x{failed.attempts}"
        return "no error"

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "builtins.ValueError x3"
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
        "InvalidValue",
        "DuplicateSchedule",
        "TransientWorkflow",
        "Unsupported",
        "ConfigError",
    }
    # A bad value is still a ValueError to code that catches one.
    with pytest.raises(ValueError, match=r"invalid duration for sleep duration: 'soon'"):
        cairn.durations.parse("soon", what="sleep duration")
    # A wrong call of a cairn function is still a TypeError to code that catches one.
    with pytest.raises(TypeError, match=r"wrong call of cairn\.sleep: got an unexpected"):
        cairn.sleep("1s", nap=True)  # type: ignore[call-overload]
