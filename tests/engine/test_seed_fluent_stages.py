"""Fluent chains whose stages suspend: screens, waits, sleeps, emits, workflow-kind stages.

A step stage cannot ask a person or wait for an event (a step is not replayed); these
stages run in workflow code, so a chain can pause for a screen and carry its answer on.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pydantic
import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.runtime.tasks import TaskInfo
from cairn.testing import replay

from .kit import WAIT, Kit
from .seeds import drive, sleeping_until, until

REVIEW = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["approved"],
}


async def fetch_order(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "total": 15}


def generate_letter(order: dict[str, Any]) -> dict[str, Any]:
    return {"order": order["id"], "text": f"Dear customer of {order['id']}"}


async def open_task(engine: cairn.Engine, run_id: str) -> TaskInfo:
    """The run's open task, once the run has created it."""
    async with asyncio.timeout(WAIT):
        while True:
            tasks = await engine.tasks.list(run_id=run_id)
            if tasks:
                return tasks[0]
            await asyncio.sleep(0.005)


async def test_fluent__a_screen_stage_hands_its_answer_to_the_next_stage(kit: Kit) -> None:
    def send_letter(answer: dict[str, Any]) -> str:
        return "sent" if answer["approved"] else f"held: {answer['note']}"

    workflow = (
        cairn.Workflow("fluent.review", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch_order))
        .then(cairn.Step("generate-letter", generate_letter))
        .screen(
            "review-letter",
            title=lambda letter: f"Review the letter for {letter['order']}",
            form=REVIEW,
            assignee="ann",
        )
        .then(cairn.Step("send-letter", send_letter))
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-1")
        task = await open_task(engine, run.run_id)
        assert (task.name, task.title, task.assignee) == (
            "review-letter",
            "Review the letter for o-1",
            "ann",
        )
        assert task.data == {"order": "o-1", "text": "Dear customer of o-1"}
        assert task.form == REVIEW
        with pytest.raises(cairn.InvalidSubmission):
            await engine.tasks.submit(task.task_id, {"note": "no verdict"})
        await engine.tasks.submit(task.task_id, {"approved": False, "note": "typo"}, by="ann")
        assert await run.result(timeout=WAIT) == "held: typo"
        history = await engine.history(run.run_id)
    assert [h.key for h in history] == [
        "fetch-order#1",
        "generate-letter#1",
        "~task:review-letter#1",
        "send-letter#1",
    ]
    assert [type(s).__name__ for s in workflow.stages][2] == "tuple"
    assert workflow.stages[2][:2] == ("screen", "review-letter")


class Review(pydantic.BaseModel):
    """A screen's form as a pydantic model: the next stage gets an instance."""

    approved: bool
    note: str = ""


async def test_fluent__a_screen_with_a_pydantic_form_hands_on_a_model(kit: Kit) -> None:
    def verdict(review: Review) -> str:
        assert isinstance(review, Review)
        return f"{review.approved}: {review.note}"

    workflow = (
        cairn.Workflow("fluent.review-model", registry=kit.registry)
        .screen("review-order", title="Review the order", form=Review)
        .then(verdict)
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, {"id": "o-10"})
        task = await open_task(engine, run.run_id)
        assert task.data == {"id": "o-10"}  # a first stage shows the run's argument
        await engine.tasks.submit(task.task_id, {"approved": "yes", "note": "fine"})
        assert await run.result(timeout=WAIT) == "True: fine"


async def test_fluent__a_wait_stage_is_resumed_by_an_event(kit: Kit) -> None:
    workflow = (
        cairn.Workflow("fluent.wait", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch_order))
        .wait_for_event("payment")
        .then(lambda paid: f"paid {paid['amount']}", name="receipt")
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-2")
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "payment", {"amount": 15})
        assert await run.result(timeout=WAIT) == "paid 15"
        keys = [h.key for h in await engine.history(run.run_id)]
    assert keys == ["fetch-order#1", "~event:payment#1", "receipt#1"]


async def test_fluent__a_wait_stage_with_a_default_times_out_to_it(kit: Kit) -> None:
    clock = VirtualClock()
    workflow = (
        cairn.Workflow("fluent.wait-default", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch_order))
        .wait_for_event("payment", timeout="1 hour", default={"amount": 0})
        .then(lambda paid: paid["amount"], name="amount")
    )

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(workflow, "o-3")
        await until(engine, run.run_id, "WAITING")
        clock.advance(3601)
        await drive(engine, clock, run.run_id, lambda r: r.status == "COMPLETED")
        assert await run.result(timeout=WAIT) == 0


async def test_fluent__a_sleep_stage_passes_the_previous_result_on(kit: Kit) -> None:
    clock = VirtualClock()
    workflow = (
        cairn.Workflow("fluent.sleep", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch_order))
        .sleep("1 day", name="cool-off")
        .then(lambda order: order["id"], name="order-id")
    )

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(workflow, "o-4")
        await drive(engine, clock, run.run_id, sleeping_until(started + 86400, within=5))
        assert (await engine.control.record(run.run_id)).status == "SLEEPING"
        clock.advance(86400)
        await drive(engine, clock, run.run_id, lambda r: r.status == "COMPLETED")
        assert await run.result(timeout=WAIT) == "o-4"
        keys = [h.key for h in await engine.history(run.run_id)]
    assert keys == ["fetch-order#1", "~sleep:cool-off#1", "order-id#1"]


async def test_fluent__an_emit_stage_starts_the_subscribers(kit: Kit) -> None:
    @kit.workflow("fluent.on-letter", on="letter.ready")
    async def on_letter(letter: dict[str, Any]) -> str:
        return str(letter["order"])

    workflow = (
        cairn.Workflow("fluent.emitter", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch_order))
        .then(cairn.Step("generate-letter", generate_letter))
        .emit("letter.ready", key=lambda letter: f"letter-{letter['order']}")
        .then(lambda letter: letter["text"], name="text")
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-5")
        assert await run.result(timeout=WAIT) == "Dear customer of o-5"
        [started] = await engine.list_runs(workflow=on_letter)
        assert await (await engine.get(started.run_id)).result(timeout=WAIT) == "o-5"
        again = await engine.emit("letter.ready", {"order": "x"}, key="letter-o-5")
        keys = [h.key for h in await engine.history(run.run_id)]
    assert [h.run_id for h in again] == [started.run_id]  # the stage's key was remembered
    assert keys == ["fetch-order#1", "generate-letter#1", "~emit:letter.ready#1", "text#1"]


async def test_fluent__a_stage_with_the_resume_guard_returns_the_answer(kit: Kit) -> None:
    seen: list[Any] = []

    def review(ctx: Any, letter: dict[str, Any]) -> Any:
        seen.append(ctx.resume_data)
        if ctx.resume_data:
            return ctx.resume_data
        return ctx.screen("review-letter", title="Review the letter", data=letter, form=REVIEW)

    workflow = (
        cairn.Workflow("fluent.guard", registry=kit.registry)
        .then(cairn.Step("generate-letter", generate_letter))
        .then(review, kind="workflow")
        .then(lambda answer: answer["approved"], name="verdict")
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, {"id": "o-6"})
        task = await open_task(engine, run.run_id)
        assert task.data == {"order": "o-6", "text": "Dear customer of o-6"}
        await engine.tasks.submit(task.task_id, {"approved": True})
        assert await run.result(timeout=WAIT) is True
        history = await engine.history(run.run_id)
    assert [h.key for h in history] == ["generate-letter#1", "~task:review-letter#1", "verdict#1"]
    replay(history, workflow, {"id": "o-6"})  # the same calls, offline, in the same order

    def review_renamed(ctx: Any, letter: dict[str, Any]) -> Any:
        if ctx.resume_data:
            return ctx.resume_data
        return ctx.screen("check-letter", title="Review the letter", data=letter)

    changed = (
        cairn.Workflow("fluent.guard", registry=cairn.Registry())
        .then(cairn.Step("generate-letter", generate_letter))
        .then(review_renamed, kind="workflow")
        .then(lambda answer: answer["approved"], name="verdict")
    )
    with pytest.raises(cairn.NonDeterminismError, match=r"check-letter"):
        replay(history, changed, {"id": "o-6"})
    # The stage ran before the screen, then again after it with the answer (on every
    # replay the same way): never with the answer before the screen was answered.
    assert seen[0] is None and seen[-1] == {"approved": True}
    assert set(map(repr, seen)) == {"None", "{'approved': True}"}


async def test_fluent__a_resumed_stage_that_asks_again_gets_a_second_screen(kit: Kit) -> None:
    def ask_until_yes(ctx: Any, order: dict[str, Any]) -> Any:
        if ctx.resumed and ctx.resume_data.get("approved"):
            return {**order, "approved": True}
        return ctx.wait_for_event("decision")

    workflow = (
        cairn.Workflow("fluent.ask-again", registry=kit.registry)
        .then(fetch_order)
        .then(ask_until_yes, kind="workflow")
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-7")
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "decision", {"approved": False})
        await engine.send_event(run.run_id, "decision", {"approved": True})
        assert await run.result(timeout=WAIT) == {"id": "o-7", "total": 15, "approved": True}
        keys = [h.key for h in await engine.history(run.run_id)]
    assert keys == ["fetch_order#1", "~event:decision#1", "~event:decision#2"]


async def test_fluent__a_workflow_kind_stage_runs_in_workflow_code(kit: Kit) -> None:
    @kit.workflow("fluent.on-order", on="order.checked")
    async def on_order(order: dict[str, Any]) -> str:
        return str(order["id"])

    async def check(ctx: Any, order: dict[str, Any]) -> dict[str, Any]:
        cairn.set_columns(order=order["id"])
        paid = await ctx.wait_for_event("payment")  # awaited: its payload, no re-run
        await cairn.emit("order.checked", order)
        return {**order, "paid": paid, "resumed": ctx.resumed}

    workflow = (
        cairn.Workflow("fluent.workflow-kind", registry=kit.registry)
        .then(fetch_order)
        .then(check, kind="workflow")
    )

    async with kit.engine() as engine:
        run = await engine.start(workflow, "o-8")
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "payment", 15)
        result = await run.result(timeout=WAIT)
        [started] = await engine.list_runs(workflow=on_order)
        keys = [h.key for h in await engine.history(run.run_id)]
    assert result == {"id": "o-8", "total": 15, "paid": 15, "resumed": False}
    assert keys == ["fetch_order#1", "~event:payment#1", "~emit:order.checked#1"]
    assert started.workflow == "fluent.on-order"


async def test_fluent__a_chain_waiting_on_a_screen_survives_a_restart(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    async def fetch(order_id: str) -> dict[str, Any]:
        calls["fetch"] += 1
        return await fetch_order(order_id)

    def letter(order: dict[str, Any]) -> dict[str, Any]:
        calls["letter"] += 1
        return generate_letter(order)

    def send(answer: dict[str, Any]) -> str:
        calls["send"] += 1
        return "sent" if answer["approved"] else "held"

    workflow = (
        cairn.Workflow("fluent.restart", registry=kit.registry)
        .then(cairn.Step("fetch-order", fetch))
        .then(cairn.Step("generate-letter", letter))
        .screen("review-letter", title="Review the letter", form=REVIEW)
        .then(cairn.Step("send-letter", send))
    )

    async with kit.engine() as first:
        run = await first.start(workflow, "o-9", run_id="fluent-restart")
        await open_task(first, run.run_id)
        await until(first, run.run_id, "WAITING")
    async with kit.engine() as again:
        task = await open_task(again, run.run_id)
        await again.tasks.submit(task.task_id, {"approved": True})
        assert await (await again.get(run.run_id)).result(timeout=WAIT) == "sent"
    assert calls == {"fetch": 1, "letter": 1, "send": 1}


async def test_fluent__bad_suspending_stages_are_named(kit: Kit) -> None:
    chain = cairn.Workflow("fluent.bad-stages", registry=kit.registry)
    with pytest.raises(ValueError, match=r"workflow 'fluent.bad-stages': kind must be 'step' or"):
        chain.then(fetch_order, kind="child")

    def review(ctx: Any, letter: Any) -> Any:
        return letter

    with pytest.raises(TypeError, match=r"options apply to step stages; stage 'review' is kind="):
        chain.then(review, kind="workflow", retries=2)
    with pytest.raises(TypeError, match=r"kind='workflow' needs a plain function, got Step"):
        chain.then(cairn.Step("fetch-order", fetch_order), kind="workflow")
    with pytest.raises(TypeError, match=r"screen 'review' title must be a string or a function"):
        chain.screen("review", title=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"human task name"):
        chain.screen("", title="Review")
    with pytest.raises(ValueError, match=r"invalid duration for sleep stage: .soon."):
        chain.sleep("soon")
    with pytest.raises(ValueError, match=r"event name"):
        chain.wait_for_event("")
    with pytest.raises(TypeError, match=r"emit 'x.y' key must be a string or a function"):
        chain.emit("x.y", key=5)  # type: ignore[arg-type]

    async def both(ctx: Any, n: int) -> Any:
        asked = ctx.wait_for_event("twice")
        await asked
        return asked

    twice = (
        cairn.Workflow("fluent.both", registry=kit.registry)
        .then(lambda n: n, name="first")
        .then(both, kind="workflow")
    )
    async with kit.engine() as engine:
        run = await engine.start(twice, 1)
        await until(engine, run.run_id, "WAITING")
        await engine.send_event(run.run_id, "twice", 2)
        with pytest.raises(cairn.RunFailed, match=r"returned a suspension it had awaited"):
            await run.result(timeout=WAIT)
