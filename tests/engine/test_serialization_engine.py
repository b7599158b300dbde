"""Serialization at the engine's edges: bad arguments, bad step results, rich types."""

from __future__ import annotations

import asyncio
import enum
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

import cairn

from .kit import WAIT, Kit


class Lock:
    """A value JSON cannot hold."""


class Colour(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Parcel:
    sku: str
    weight: Decimal
    shipped: datetime


async def test_start__unserializable_arguments_raise_before_anything_is_committed(
    kit: Kit,
) -> None:
    @kit.workflow("serial.args")
    async def takes(*args: Any, **kwargs: Any) -> int:
        return len(args) + len(kwargs)

    async with kit.engine() as engine:
        assert engine.worker is not None
        free = engine.worker.free
        with pytest.raises(cairn.SerializationError) as positional:
            await engine.start(takes, 1, Lock(), run_id="bad-1")
        with pytest.raises(cairn.SerializationError) as keyword:
            await engine.start(takes, item={"lock": threading.Lock()}, run_id="bad-2")
        assert engine.worker.free == free  # no slot leaked by the failed starts
        assert len(await engine.list_runs()) == 0
        for run_id in ("bad-1", "bad-2"):
            with pytest.raises(cairn.RunNotFound):
                await engine.get(run_id)
        # The same run id is still free, and the engine still works.
        run = await engine.start(takes, 1, 2, run_id="bad-1")
        assert await run.result(timeout=WAIT) == 2
    for info, type_name in ((positional, "Lock"), (keyword, "lock")):
        message = str(info.value)
        assert "'serial.args'" in message and type_name in message and "\n" not in message
        assert info.value.what == "arguments of workflow 'serial.args'"


async def test_step_result__unserializable_raises_at_the_call_site(kit: Kit) -> None:
    calls: list[int] = []

    @kit.step("make_lock", retries=3)
    def make_lock() -> Lock:
        calls.append(1)
        return Lock()

    @kit.step("fine")
    def fine() -> str:
        return "fine"

    @kit.workflow("serial.step_result")
    async def step_result() -> dict[str, Any]:
        try:
            await make_lock()
        except cairn.StepFailed:
            return {"wrapped": True}
        except cairn.SerializationError as exc:
            return {
                "message": str(exc),
                "what": exc.what,
                "type_name": exc.type_name,
                "next": await fine(),
            }
        return {}

    async with kit.engine() as engine:
        run = await engine.start(step_result)
        result = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
        failed_attempts = await engine.control.attempts(run.run_id)
    assert calls == [1]  # not retried
    assert result["what"] == "result of step 'make_lock'"
    assert result["type_name"].endswith("test_serialization_engine.Lock")
    assert "'make_lock'" in result["message"] and "Lock" in result["message"]
    assert result["next"] == "fine"
    # Recorded as failed (not retried), so that a replay raises it again right there.
    assert [(h.key, h.status) for h in history] == [
        ("make_lock#1", "failed"),
        ("fine#1", "completed"),
    ]
    assert history[0].error is not None
    assert history[0].error["error_type"] == "cairn.errors.SerializationError"
    assert failed_attempts == []


async def test_step_result__unserializable_replays_as_the_same_error(kit: Kit) -> None:
    # Issue 12, item 3: the run waits after catching the error, and the engine restarts;
    # the replay must raise the same SerializationError at the same place, not diverge.
    calls: list[int] = []

    @kit.step("make_lock")
    def make_lock() -> Lock:
        calls.append(1)
        return Lock()

    @kit.workflow("serial.replayed")
    async def replayed() -> str:
        try:
            await make_lock()
        except cairn.SerializationError as exc:
            caught = exc.what
        approval = await cairn.wait_for_event("go")
        return f"{caught} / {approval}"

    async with kit.engine() as engine:
        run = await engine.start(replayed)
        for _ in range(500):
            if await run.status() == cairn.RunStatus.WAITING:
                break
            await asyncio.sleep(0.01)
    async with kit.engine() as engine:
        again = await engine.get(run.run_id)
        await again.send_event("go", "ok")
        result = await again.result(timeout=WAIT)
    assert result == "result of step 'make_lock' / ok"
    assert calls == [1]


@pytest.mark.parametrize("sync", [False, True], ids=["async_workflow", "sync_workflow"])
async def test_step_result__unserializable_uncaught_fails_the_run(kit: Kit, sync: bool) -> None:
    @kit.step("make_lock")
    async def make_lock() -> Lock:
        return Lock()

    if sync:

        @kit.workflow("serial.uncaught")
        def uncaught_sync() -> None:
            make_lock()

        workflow = uncaught_sync
    else:

        @kit.workflow("serial.uncaught")
        async def uncaught() -> None:
            await make_lock()

        workflow = uncaught

    async with kit.engine() as engine:
        run = await engine.start(workflow)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
    assert info.value.error_type == "cairn.errors.SerializationError"
    assert "'make_lock'" in info.value.error_message


async def test_workflow_result__unserializable_fails_the_run(kit: Kit) -> None:
    @kit.workflow("serial.result")
    async def result() -> Lock:
        return Lock()

    async with kit.engine() as engine:
        run = await engine.start(result)
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
    assert info.value.error_type == "cairn.errors.SerializationError"
    assert "workflow 'serial.result'" in info.value.error_message


async def test_rich_types__round_trip_through_arguments_steps_and_results(kit: Kit) -> None:
    parcel = Parcel("sku-1", Decimal("1.250"), datetime(2024, 5, 1, 12, 30, tzinfo=UTC))
    values: dict[str, Any] = {
        "when": date(2024, 1, 2),
        "wait": timedelta(hours=1, seconds=5),
        "id": uuid.UUID(int=7),
        "blob": b"\x00\xff",
        "colour": Colour.RED,
        "pair": (1, "two"),
        "tags": {"a", "b"},
        "frozen": frozenset({3}),
    }

    @kit.step("echo")
    def echo(value: Any) -> Any:
        return value

    @kit.workflow("serial.rich")
    async def rich(p: Parcel, *, extra: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(p, Parcel)
        return {"parcel": await echo(p), "extra": await echo(extra)}

    async with kit.engine() as engine:
        run = await engine.start(rich, parcel, extra=values)
        got = await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert got == {"parcel": parcel, "extra": values}
    assert type(got["parcel"]) is Parcel and type(got["extra"]["pair"]) is tuple
    assert history[0].result == parcel
