"""A parent waiting on a child names the child, and what the child itself waits for.

Issue 31, item 5: `runs show PARENT` said "child run of 'claims.review'" without the
child's id, and the tasks of a run missed the task its child waits on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import cairn
from cairn.representation import runs as run_forms
from cairn.representation import words
from cairn.runtime import blocking
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, status: str) -> RunRecord:
    """The stored run once it is in `status` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.store.read(run_ops.get_run(run_id))
            if run is not None and run.status == status:
                return run
            await asyncio.sleep(0.005)


def claims(kit: Kit) -> cairn.WorkflowDef[..., Any]:
    """claims.intake -> claims.triage -> claims.review, which waits on a human task."""

    @kit.workflow("claims.review")
    async def review() -> Any:
        return await cairn.human_task("approve", title="Approve the claim")

    @kit.workflow("claims.triage")
    async def triage() -> Any:
        return await review()

    @kit.workflow("claims.intake")
    async def intake() -> Any:
        return await triage()

    return intake


async def test_waiting_on_a_child__names_the_child_and_its_own_reason(kit: Kit) -> None:
    intake = claims(kit)
    async with kit.engine() as engine:
        await engine.start(intake, run_id="cl")
        middle, leaf = "cl/claims.triage#1", "cl/claims.triage#1/claims.review#1"
        await until(engine, leaf, "WAITING")
        parent = await until(engine, "cl", "WAITING")
        await until(engine, middle, "WAITING")
        (task,) = await engine.tasks.list(run_id=leaf)

        # The one-line reason (as runs are listed) names the child, read from the run alone.
        assert blocking.reason(parent, now=engine.clock.now()) == (
            f"child run of 'claims.triage' ({middle})"
        )

        # One run shown: the nearest child's id and its reason, nested to its own child.
        shown = await run_forms.fetch(engine.control, "cl")
        found = shown.waiting
        assert found is not None and found["kind"] == "child"
        assert found["child"]["run_id"] == middle
        assert found["child"]["status"] == "WAITING"
        assert found["child"]["waiting"]["child"]["run_id"] == leaf
        assert found["child"]["waiting"]["child"]["waiting"]["task_id"] == task.task_id
        text = words.waiting_text(found, now=shown.now, run_id="cl")
        assert middle in text and leaf in text, text
        assert f"human task 'approve' (task {task.task_id})" in text, text
        assert run_forms.run_dict(shown)["waiting"]["child"]["run_id"] == middle


async def test_waiting_on_a_child__depth_shown_is_bounded(kit: Kit) -> None:
    intake = claims(kit)
    async with kit.engine() as engine:
        await engine.start(intake, run_id="cb")
        leaf = "cb/claims.triage#1/claims.review#1"
        await until(engine, leaf, "WAITING")
        await until(engine, "cb", "WAITING")
        shown = await run_forms.fetch(engine.control, "cb", child_depth=1)
        assert shown.waiting is not None
        child = shown.waiting["child"]
        assert child["run_id"] == "cb/claims.triage#1"
        # Past the bound the child's own reason is read from its row alone: its id, no more.
        assert "child" not in child["waiting"]
        assert child["waiting"]["child_id"] == leaf


async def test_tasks_of_a_run__with_descendants(kit: Kit) -> None:
    intake = claims(kit)
    async with kit.engine() as engine:
        await engine.start(intake, run_id="ct")
        leaf = "ct/claims.triage#1/claims.review#1"
        await until(engine, leaf, "WAITING")
        (task,) = await engine.tasks.list(run_id=leaf)
        assert await engine.tasks.list(run_id="ct") == []  # the run's own tasks: none
        tree = await engine.tasks.list(run_id="ct", descendants=True)
        assert [t.task_id for t in tree] == [task.task_id]
        middle = await engine.tasks.list(run_id="ct/claims.triage#1", descendants=True)
        assert [t.task_id for t in middle] == [task.task_id]
        assert await engine.tasks.list(run_id="other", descendants=True) == []
        assert await engine.tasks.list(run_id=leaf, descendants=True) == [task]


async def test_runs_of_a_tree__the_run_and_its_descendants(kit: Kit) -> None:
    intake = claims(kit)
    async with kit.engine() as engine:
        await engine.start(intake, run_id="cr")
        await engine.start(intake, run_id="other")
        await until(engine, "cr/claims.triage#1/claims.review#1", "WAITING")
        await until(engine, "other/claims.triage#1/claims.review#1", "WAITING")
        page = await engine.list_runs(tree="cr")
        assert sorted(r.run_id for r in page) == [
            "cr",
            "cr/claims.triage#1",
            "cr/claims.triage#1/claims.review#1",
        ]
        below = await engine.list_runs(tree="cr/claims.triage#1", workflow="claims.review")
        assert [r.run_id for r in below] == ["cr/claims.triage#1/claims.review#1"]
        counts = await engine.control.count_runs(tree="cr")
        assert counts[cairn.RunStatus.WAITING] == 3
        assert [r.run_id for r in await engine.list_runs(tree="nope")] == []
