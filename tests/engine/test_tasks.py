"""Human tasks: the inbox, forms as JSON Schema or pydantic models, audit and expiry."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pydantic
import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.runtime.tasks import TaskInfo
from cairn.store.records import RunRecord

from .kit import WAIT, Kit

SCHEMA = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "amount": {"type": "integer", "minimum": 0},
        "note": {"type": "string"},
    },
    "required": ["approved", "amount"],
}


class Approval(pydantic.BaseModel):
    """A pydantic form: what a reviewer submits."""

    approved: bool
    amount: int = pydantic.Field(ge=0)
    note: str = ""


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def open_task(engine: cairn.Engine, run_id: str) -> TaskInfo:
    """The run's open task, once the run has created it."""
    async with asyncio.timeout(WAIT):
        while True:
            tasks = [t for t in await engine.tasks.list() if t.run_id == run_id]
            if tasks:
                return tasks[0]
            await asyncio.sleep(0.005)


async def test_human_task__json_schema_form_inbox_and_audit(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("tasks.review")
    async def review(order: str) -> Any:
        values = await cairn.human_task(
            "review",
            title=f"Review order {order}",
            data={"order": order, "total": 120},
            form=SCHEMA,
            assignee="ann",
            timeout="1d",
        )
        return {"values": values, "order": order}

    async with kit.engine(clock=clock) as engine:
        created = clock.now()
        run = await engine.start(review, "o-7")
        task = await open_task(engine, run.run_id)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.waiting_for is not None and "review" in parked.waiting_for
        assert (task.name, task.title, task.status, task.assignee) == (
            "review",
            "Review order o-7",
            "open",
            "ann",
        )
        assert task.data == {"order": "o-7", "total": 120} and task.form == SCHEMA
        assert task.created_at.timestamp() == pytest.approx(created)
        assert task.due_at is not None
        assert task.due_at - task.created_at == timedelta(days=1)
        assert (task.submitted_at, task.submitted_by, task.values) == (None, None, None)
        assert await engine.tasks.get(task.task_id) == task
        assert [t.task_id for t in await engine.tasks.list(assignee="ann")] == [task.task_id]
        assert await engine.tasks.list(assignee="bob") == []

        with pytest.raises(cairn.InvalidSubmission) as bad:
            await engine.tasks.submit(task.task_id, {"amount": -5, "note": 3})
        assert set(bad.value.fields) == {"approved", "amount", "note"}
        for name in ("approved", "amount", "note"):
            assert name in str(bad.value)
        with pytest.raises(cairn.InvalidSubmission):
            await engine.tasks.submit(task.task_id, ["not", "an", "object"])
        assert (await engine.tasks.get(task.task_id)).status == "open"  # nothing changed

        clock.advance(60)
        done = await engine.tasks.submit(task.task_id, {"approved": True, "amount": 120}, by="ann")
        assert (done.status, done.submitted_by) == ("submitted", "ann")
        assert done.submitted_at is not None
        assert done.submitted_at.timestamp() == pytest.approx(created + 60)
        assert done.values == {"approved": True, "amount": 120}
        assert await run.result(timeout=WAIT) == {
            "values": {"approved": True, "amount": 120},
            "order": "o-7",
        }
        with pytest.raises(cairn.TaskNotFound, match="submitted"):
            await engine.tasks.submit(task.task_id, {"approved": False, "amount": 0})
        assert await engine.tasks.list() == []
        [kept] = await engine.tasks.list(status="submitted")
        assert await engine.tasks.list(status=None) == [kept]
        [entry] = await engine.history(run.run_id)
    assert (kept.submitted_by, kept.values) == ("ann", {"approved": True, "amount": 120})
    assert (entry.kind, entry.name, entry.status) == ("task", "review", "completed")


async def test_human_task__pydantic_form_returns_a_model_instance(kit: Kit) -> None:
    seen: list[Any] = []

    @kit.workflow("tasks.model")
    async def model_form() -> str:
        approval = await cairn.human_task("approve", title="Approve", form=Approval)
        seen.append(approval)
        return f"{type(approval).__name__}:{approval.approved}:{approval.amount}"

    async with kit.engine() as engine:
        run = await engine.start(model_form)
        task = await open_task(engine, run.run_id)
        assert task.form == Approval.model_json_schema()
        with pytest.raises(cairn.InvalidSubmission) as bad:
            await engine.tasks.submit(task.task_id, {"approved": "perhaps", "amount": -1})
        assert set(bad.value.fields) == {"approved", "amount"}
        done = await engine.tasks.submit(task.task_id, {"approved": True, "amount": "7"})
        assert done.values == {"approved": True, "amount": 7, "note": ""}  # coerced, stored
        assert await run.result(timeout=WAIT) == "Approval:True:7"
    assert isinstance(seen[-1], Approval)


async def test_human_task__timeout_expires_the_task(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("tasks.expiry")
    async def expiring() -> str:
        try:
            await cairn.human_task("sign", title="Sign", timeout="2h")
        except cairn.EventTimeout as exc:
            return f"expired: {exc}"
        return "signed"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(expiring)
        task = await open_task(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        clock.advance(7200)
        message = await run.result(timeout=WAIT)
        expired = await engine.tasks.get(task.task_id)
        with pytest.raises(cairn.TaskNotFound):
            await engine.tasks.submit(task.task_id, {})
        [entry] = await engine.history(run.run_id)
    assert message.startswith("expired:") and "'sign'" in message
    assert expired.status == "expired"
    assert (entry.kind, entry.status) == ("task", "timeout")


async def test_human_task__no_form_takes_any_object(kit: Kit) -> None:
    @kit.workflow("tasks.free")
    async def free_form() -> Any:
        return await cairn.human_task("comment", title="Say something")

    async with kit.engine() as engine:
        run = await engine.start(free_form)
        task = await open_task(engine, run.run_id)
        assert (task.form, task.assignee, task.due_at, task.data) == (None, None, None, None)
        await engine.tasks.submit(task.task_id, {"anything": [1, 2]}, by="bob")
        assert await run.result(timeout=WAIT) == {"anything": [1, 2]}


async def test_tasks__unknown_task(kit: Kit) -> None:
    async with kit.engine(workers=0) as engine:
        with pytest.raises(cairn.TaskNotFound, match="'nope'"):
            await engine.tasks.get("nope")
        with pytest.raises(cairn.TaskNotFound, match="'nope'"):
            await engine.tasks.submit("nope", {})


async def test_human_task__bad_form_fails_the_run_naming_it(kit: Kit) -> None:
    @kit.workflow("tasks.bad_form")
    async def bad_form() -> str:
        try:
            await cairn.human_task("x", title="X", form="not a form")
        except TypeError as exc:
            return str(exc)
        return "created"

    async with kit.engine() as engine:
        message = await (await engine.start(bad_form)).result(timeout=WAIT)
        assert await engine.tasks.list(status=None) == []
    assert "'not a form'" in message


async def test_human_task__open_tasks_close_when_the_run_is_cancelled(kit: Kit) -> None:
    @kit.workflow("tasks.cancelled")
    async def cancelled() -> Any:
        return await cairn.human_task("ok", title="OK?")

    async with kit.engine() as engine:
        run = await engine.start(cancelled)
        task = await open_task(engine, run.run_id)
        await until(engine, run.run_id, "WAITING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        with pytest.raises(cairn.TaskNotFound):
            await engine.tasks.submit(task.task_id, {})
        assert (await engine.tasks.get(task.task_id)).status != "open"
