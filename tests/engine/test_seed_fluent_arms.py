"""Branch arms hold every kind of stage a chain does (seed 000: "route only exceptional
cases to a screen using conditionals").

`cairn.Workflow.arm()` builds an arm with the chain's own methods: a screen answered from
outside, a workflow-kind stage with the resume guard, a wait, another branch, each
behaving as it does in the chain itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.authoring.fluent import Arm
from cairn.testing import replay

from .kit import WAIT, Kit
from .seeds import until
from .test_seed_fluent_stages import REVIEW, open_task


def recommend(order: dict[str, Any]) -> dict[str, Any]:
    risk = "high" if order["total"] > 100 else "low"
    return {"order": order["id"], "risk": risk, "approved": risk == "low"}


def send_letter(answer: dict[str, Any]) -> str:
    return "sent" if answer["approved"] else f"held: {answer.get('note')}"


def high_risk(recommendation: dict[str, Any]) -> bool:
    return bool(recommendation["risk"] == "high")


async def test_fluent_arm__a_screen_on_one_path_is_answered_from_outside(kit: Kit) -> None:
    workflow = (
        cairn.Workflow("fluent.arm.screen", registry=kit.registry)
        .then(cairn.Step("recommend", recommend))
        .branch(
            high_risk,
            then=cairn.Workflow.arm().screen(
                "review-letter",
                title=lambda rec: f"Review the letter for {rec['order']}",
                form=REVIEW,
                assignee="ann",
            ),
            otherwise=None,
        )
        .then(cairn.Step("send-letter", send_letter))
    )

    async with kit.engine() as engine:
        low = await engine.start(workflow, {"id": "o-1", "total": 15})
        assert await low.result(timeout=WAIT) == "sent"
        assert await engine.tasks.list(run_id=low.run_id) == []

        high = await engine.start(workflow, {"id": "o-2", "total": 500})
        task = await open_task(engine, high.run_id)
        assert (task.name, task.title, task.assignee, task.form) == (
            "review-letter",
            "Review the letter for o-2",
            "ann",
            REVIEW,
        )
        assert task.data == {"order": "o-2", "risk": "high", "approved": False}
        await until(engine, high.run_id, "WAITING")
        with pytest.raises(cairn.InvalidSubmission):
            await engine.tasks.submit(task.task_id, {"note": "no verdict"})
        await engine.tasks.submit(task.task_id, {"approved": False, "note": "typo"}, by="ann")
        assert await high.result(timeout=WAIT) == "held: typo"
        keys = [entry.key for entry in await engine.history(high.run_id)]
        assert keys.index("recommend#1") < keys.index("~task:review-letter#1")
        assert keys.index("~task:review-letter#1") < keys.index("send-letter#1")
        replay(await engine.history(high.run_id), workflow, {"id": "o-2", "total": 500})


async def test_fluent_arm__a_workflow_kind_stage_with_the_resume_guard(kit: Kit) -> None:
    calls: list[Any] = []

    def review(ctx: Any, recommendation: dict[str, Any]) -> Any:
        calls.append(ctx.resume_data)
        if ctx.resume_data:
            return ctx.resume_data
        return ctx.screen("review", title="Review", data=recommendation, form=REVIEW)

    def auto(ctx: Any, recommendation: dict[str, Any]) -> dict[str, Any]:
        return {**recommendation, "note": f"automatic, resumed={ctx.resumed}"}

    workflow = (
        cairn.Workflow("fluent.arm.kind", registry=kit.registry)
        .then(cairn.Step("recommend", recommend))
        .branch(
            high_risk,
            then=cairn.Workflow.arm().then(review, kind="workflow"),
            otherwise=[cairn.Workflow.arm().then(auto, kind="workflow")],
        )
        .then(send_letter)
    )

    async with kit.engine() as engine:
        low = await engine.start(workflow, {"id": "o-1", "total": 15})
        assert await low.result(timeout=WAIT) == "sent"

        high = await engine.start(workflow, {"id": "o-2", "total": 500})
        task = await open_task(engine, high.run_id)
        assert task.data == {"order": "o-2", "risk": "high", "approved": False}
        await engine.tasks.submit(task.task_id, {"approved": True})
        assert await high.result(timeout=WAIT) == "sent"
        assert calls[-1] == {"approved": True}
        replay(await engine.history(high.run_id), workflow, {"id": "o-2", "total": 500})


async def test_fluent_arm__waits_sleeps_emits_and_branches_inside_an_arm(kit: Kit) -> None:
    started: list[Any] = []

    @kit.workflow("fluent.arm.audit", on="order.flagged")
    async def audit(order: Any) -> None:
        started.append(order)

    workflow = cairn.Workflow("fluent.arm.mixed", registry=kit.registry).branch(
        lambda n: n > 10,
        then=cairn.Workflow.arm()
        .emit("order.flagged")
        .wait_for_event("decision", timeout="1 hour")
        .branch(lambda d: d == "double", then=lambda d: 2, otherwise=lambda d: 1),
        otherwise=cairn.Workflow.arm().sleep(0, name="pause").then(lambda n: n + 1, name="inc"),
    )

    async with kit.engine() as engine:
        small = await engine.start(workflow, 3)
        assert await small.result(timeout=WAIT) == 4
        big = await engine.start(workflow, 30)
        await until(engine, big.run_id, "WAITING")
        await engine.send_event(big.run_id, "decision", "double")
        assert await big.result(timeout=WAIT) == 2
        # The emitted event starts the audit as a run of its own, which may end after `big`.
        for _ in range(int(WAIT / 0.05)):
            if started:
                break
            await asyncio.sleep(0.05)
        assert started == [30]
        replay(await engine.history(big.run_id), workflow, 30)


def test_fluent_arm__built_and_listed_like_a_chain(kit: Kit) -> None:
    arm = cairn.Workflow.arm().screen("review", title="Review").then(send_letter)
    assert isinstance(arm, Arm)
    assert arm.stages[0] == ("screen", "review", None)
    chain = cairn.Workflow("fluent.arm.listed", registry=kit.registry).branch(bool, then=arm)
    [(kind, _, then, otherwise)] = chain.stages
    assert (kind, then[0], otherwise) == ("branch", ("screen", "review", None), [])
    with pytest.raises(
        ValueError,
        match=r"^workflow 'fluent.arm.listed': branch then= is an "
        r"empty arm",
    ):
        chain.branch(bool, then=cairn.Workflow.arm())
    with pytest.raises(TypeError, match=r"^branch arm: kind='workflow' needs a plain function"):
        cairn.Workflow.arm().then(cairn.Step("x", send_letter), kind="workflow")
    with pytest.raises(TypeError, match=r"^branch arm: screen 'r' title must be a string"):
        cairn.Workflow.arm().screen("r", title=3)  # type: ignore[arg-type]
