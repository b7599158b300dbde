"""Child runs meeting cancel, pause and SIGKILL in real `cairn worker` processes.

The test process starts, steers and inspects runs through an engine with no workers; the
runs execute in worker processes (child_flows.py), whose side-effect file proves what ran,
how often and where.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cairn
from cairn.store.records import RunRecord

from .kids_procs import Kids, child_id, kids, run_cli

pytestmark = pytest.mark.process

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "CONTINUED")


async def test_cancel_parent__awaited_children_cancelled_detached_one_finishes(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        await procs.spawn()  # two workers share the database
        run = await control.start("kids.parent", ["a", "b"], ["d"], [], allow_unknown=True)
        a, b, d = child_id(run.run_id), child_id(run.run_id, n=2), child_id(run.run_id, n=3)
        await procs.held("a", "b", "d")
        await run.cancel()
        await procs.status(control, run.run_id, *ENDED)
        for kid in (a, b):
            assert (await procs.status(control, kid, *ENDED)).status == "CANCELLED"
        assert (await control.control.record(d)).status == "RUNNING"
        procs.release("d")
        assert (await procs.status(control, d, *ENDED)).status == "COMPLETED"
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=1)
        listed = {r.run_id: r for r in await control.list_runs(limit=10)}
    counts = procs.counts()
    assert counts["parent start"] == counts["parent cleanup"] == 1
    assert counts["parent end"] == 0
    for name in ("a", "b"):
        assert counts[f"{name} start"] == counts[f"{name} cleanup"] == 1
        assert counts[f"{name} end"] == 0
    assert counts["d start"] == counts["d end"] == 1 and counts["d cleanup"] == 0
    assert listed[run.run_id].status == "CANCELLED"
    assert {listed[k].status for k in (a, b)} == {"CANCELLED"}
    assert listed[d].status == "COMPLETED" and listed[d].parent_id == run.run_id
    # The parent's history tells how each child ended, the detached one too (the parent
    # never awaited it: the cancel ended no wait of it).
    shown = run_cli(store_url, "runs", "show", run.run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    entries = [(e["key"], e["status"]) for e in json.loads(shown.stdout)["history"]]
    assert [e for e in entries if e[0].startswith("~child:")] == [
        ("~child:kids.child#1", "cancelled"),
        ("~child:kids.child#2", "cancelled"),
        ("~child:kids.child#3", "completed"),
    ]
    listed_text = run_cli(store_url, "runs", "list").stdout
    assert sum("CANCELLED" in line for line in listed_text.splitlines()) == 3


async def test_parent_ends__its_history_tells_how_an_unawaited_detached_child_is_doing(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.parent", ["a"], ["d"], [], allow_unknown=True)
        d = child_id(run.run_id, n=2)
        await procs.held("a", "d")
        procs.release("a")
        assert await run.result(timeout=20) == ["a done"]
        assert [(h.key, h.status) for h in await control.history(run.run_id)][1:3] == [
            ("~child:kids.child#1", "completed"),
            ("~child:kids.child#2", "running"),  # not "waiting": the parent has ended
        ]
        procs.release("d")
        await procs.status(control, d, "COMPLETED")
        assert [h.status for h in await control.history(run.run_id)][1:3] == [
            "completed",
            "completed",
        ]


async def test_cancel_child__the_parent_sees_child_failed_and_goes_on(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        await procs.spawn()
        run = await control.start("kids.parent", ["a", "b"], [], [], allow_unknown=True)
        a = child_id(run.run_id)
        await procs.held("a", "b")
        await control.cancel(a)
        assert (await procs.status(control, a, *ENDED)).status == "CANCELLED"
        procs.release("b")
        assert await run.result(timeout=20) == [f"failed {a}", "b done"]
    shown = run_cli(store_url, "runs", "show", run.run_id, "--json")
    entries = [(e["key"], e["status"]) for e in json.loads(shown.stdout)["history"]]
    assert entries[1:3] == [
        ("~child:kids.child#1", "cancelled"),
        ("~child:kids.child#2", "completed"),
    ]
    counts = procs.counts()
    assert counts[f"parent saw {a} cairn.errors.Cancelled"] == 1, counts
    assert counts["a cleanup"] == 1 and counts["a end"] == 0
    assert counts["parent end"] == 1 and counts["b end"] == 1


async def test_failed_child__the_parent_sees_child_failed(tmp_path: Path, store_url: str) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.parent", ["fail1"], [], [], allow_unknown=True)
        procs.release("fail1")
        got = await run.result(timeout=20)
    f = child_id(run.run_id)
    assert got == [f"failed {f}"]
    assert procs.counts()[f"parent saw {f} cairn.errors.FatalError"] == 1, procs.counts()


async def test_pause_parent__children_finish_meanwhile_resume_completes(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        await procs.spawn()
        run = await control.start("kids.parent", ["a", "b"], [], [], allow_unknown=True)
        a, b = child_id(run.run_id), child_id(run.run_id, n=2)
        await procs.held("a", "b")
        assert await run.pause() in (cairn.RunStatus.PAUSED, cairn.RunStatus.RUNNING)
        await procs.status(control, run.run_id, "PAUSED")
        procs.release("a", "b")
        await procs.status(control, a, "COMPLETED")
        await procs.status(control, b, "COMPLETED")
        assert (await control.control.record(run.run_id)).status == "PAUSED"
        shown = run_cli(store_url, "runs", "show", run.run_id).stdout
        assert f"`cairn runs resume {run.run_id}` (it is paused)" in shown, shown
        await control.resume(run.run_id)
        assert await run.result(timeout=20) == ["a done", "b done"]
    counts = procs.counts()
    assert all(v == 1 for k, v in counts.items() if not k.endswith("held")), counts


async def test_pause_parent_then_cancel__children_cancelled(tmp_path: Path, store_url: str) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.parent", ["a", "b"], [], [], allow_unknown=True)
        a, b = child_id(run.run_id), child_id(run.run_id, n=2)
        await procs.held("a", "b")
        await run.pause()
        await procs.status(control, run.run_id, "PAUSED")
        await control.pause(a)  # a paused child too, mid-step
        await run.cancel()
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, a, *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, b, *ENDED)).status == "CANCELLED"
    counts = procs.counts()
    assert counts["parent cleanup"] == counts["a cleanup"] == counts["b cleanup"] == 1, counts


async def test_queued_children__cancel_parent_ends_the_unstarted_at_once(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        await procs.spawn()
        run = await control.start("kids.parent", [], [], ["q1", "q2", "q3"], allow_unknown=True)
        q = [child_id(run.run_id, "kids.queued", n) for n in (1, 2, 3)]
        await procs.held("q1")
        shown = run_cli(store_url, "runs", "show", q[1]).stdout
        assert "queue 'kids.one_at_a_time': concurrency limit 1 reached" in shown, shown
        await run.cancel()
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        for kid in q:
            assert (await procs.status(control, kid, *ENDED)).status == "CANCELLED"
    counts = procs.counts()
    assert counts["q1 cleanup"] == 1
    assert counts["q2 start"] == counts["q3 start"] == 0, counts


async def test_grandchildren__cancel_reaches_two_levels(tmp_path: Path, store_url: str) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        await procs.spawn()
        run = await control.start("kids.grand", ["a", "b"], allow_unknown=True)
        mid = child_id(run.run_id, "kids.parent")
        await procs.held("a", "b")
        await run.cancel()
        for rid in (run.run_id, mid, child_id(mid), child_id(mid, n=2)):
            assert (await procs.status(control, rid, *ENDED)).status == "CANCELLED", rid
    counts = procs.counts()
    assert counts["parent cleanup"] == counts["a cleanup"] == counts["b cleanup"] == 1, counts


async def test_continue_as_new__children_of_a_continued_run_are_cancelled(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.looping", 1, 2, allow_unknown=True)
        await procs.held("loop2")
        first_kid = child_id(run.run_id)
        assert (await procs.status(control, first_kid, *ENDED)).status == "CANCELLED"
        procs.release("loop2")
        assert await run.result(timeout=20) == "loop2 done"
    counts = procs.counts()
    # Cancelled before it started, or at its held step: never past it either way.
    assert counts["loop1 cleanup"] == counts["loop1 start"] <= 1, counts
    assert counts["loop1 end"] == 0 and counts["loop2 end"] == 1, counts


async def test_kill_parent_worker__mid_step_the_recovered_parent_starts_no_second_child(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        doomed = await procs.spawn()
        run = await control.start(
            "kids.parent", ["a"], ["d"], [], "p", True, run_id="p", allow_unknown=True
        )
        await procs.held("p", "a", "d")  # the parent mid-step, its children mid-step
        await procs.spawn()
        doomed.kill()
        await procs.until(
            "the held steps again in the other worker",
            lambda: all(procs.counts()[f"{n} held"] == 2 for n in ("p", "a", "d")),
        )
        await run.cancel()
        assert (await procs.status(control, "p", *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, child_id("p"), *ENDED)).status == "CANCELLED"
        procs.release("d")
        assert (await procs.status(control, child_id("p", n=2), *ENDED)).status == "COMPLETED"
        runs = list(await control.list_runs(limit=20))
    counts = procs.counts()
    assert len(runs) == 3
    assert counts["p start"] == counts["a start"] == counts["d start"] == 1, counts
    assert counts["p cleanup"] == counts["a cleanup"] == counts["d end"] == 1, counts
    assert procs.pids("p cleanup") == procs.pids("a cleanup") != {doomed.pid}


async def _chain_end(control: cairn.Engine, workflow: str) -> str:
    """The id of the newest run of the (one) chain of `workflow`."""
    runs = [r for r in await control.list_runs(workflow=workflow, limit=1000)]
    return next(r.run_id for r in runs if r.continued_to is None)


async def _chain_ended(procs: Kids, control: cairn.Engine, workflow: str) -> RunRecord:
    """The last run of the (one) chain of `workflow`, once the chain has ended."""

    async def ended() -> RunRecord | None:
        last = await control.control.record(await _chain_end(control, workflow))
        return last if last.status in ENDED and last.status != "CONTINUED" else None

    record: RunRecord = await procs.until(f"the end of the chain of {workflow}", ended)
    return record


async def test_cancel_parent__a_child_going_on_as_new_each_round_is_cancelled(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.spinning_parent", 400, allow_unknown=True)
        await procs.until("a few rounds", lambda: procs.counts()["spin 3"])
        await run.cancel()
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        ended = await _chain_ended(procs, control, "kids.spinner")
    counts = procs.counts()
    assert counts["spin done"] == 0, counts
    assert ended.status == "CANCELLED"


async def test_cancel__stored_while_a_run_goes_on_as_new_ends_the_chain(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.slow_round", 0, 2, allow_unknown=True)
        await procs.until("round 0's block", lambda: procs.counts()["round 0 blocks"])
        assert await run.cancel() == cairn.RunStatus.RUNNING
        procs.release("round0", "round1", "round2")
        ended = await _chain_ended(procs, control, "kids.slow_round")
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=5)
    assert procs.counts()["round 1"] == 0
    assert (ended.run_id, ended.status, ended.continued_to) == (run.run_id, "CANCELLED", None)


async def test_cancel_parent__while_its_child_goes_on_as_new_ends_the_childs_chain(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn("--queue", "kids.parents")
        await procs.spawn("--queue", "kids.slow")  # blocked by the child, not the parent
        run = await control.start("kids.slow_parent", 2, allow_unknown=True)
        await procs.until("round 0's block", lambda: procs.counts()["round 0 blocks"])
        await run.cancel()  # the parent's end asks the child to cancel (the worker is blocked)
        kid = child_id(run.run_id, "kids.slow_round")

        async def asked() -> bool:
            return (await control.control.record(kid)).control == "cancel"

        await procs.until("the child asked to cancel", asked)
        procs.release("round0", "round1", "round2")
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        ended = await _chain_ended(procs, control, "kids.slow_round")
    assert procs.counts()["round 1"] == 0
    assert procs.counts()["parent cleanup"] == 1
    assert (ended.run_id, ended.status) == (kid, "CANCELLED")


async def test_pause__stored_while_a_run_goes_on_as_new_pauses_the_next_run(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.slow_round", 0, 1, allow_unknown=True)
        await procs.until("round 0's block", lambda: procs.counts()["round 0 blocks"])
        assert await run.pause() == cairn.RunStatus.RUNNING
        procs.release("round0", "round1")
        first = await procs.status(control, run.run_id, *ENDED)
        assert first.status == "CONTINUED" and first.continued_to is not None
        paused = await procs.status(control, first.continued_to, "PAUSED", *ENDED)
        assert paused.status == "PAUSED" and procs.counts()["round 1"] == 0
        await control.resume(paused.run_id)
        assert await run.result(timeout=20) == 1
    assert procs.counts()["round 1"] == 1


async def test_kill_child_worker__cancel_parent_reaches_the_child_its_next_worker_runs(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn("--queue", "kids.parents")
        doomed = await procs.spawn("--queue", "kids.one_at_a_time")
        run = await control.start(
            "kids.parent", [], [], ["q1", "q2"], queue="kids.parents", allow_unknown=True
        )
        q1, q2 = (child_id(run.run_id, "kids.queued", n) for n in (1, 2))
        await procs.held("q1")
        doomed.kill()
        await run.cancel()
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, q2, *ENDED)).status == "CANCELLED"  # never started
        stuck = await control.control.record(q1)
        assert (stuck.status, stuck.control) == ("RUNNING", "cancel")
        shown = run_cli(store_url, "runs", "show", q1).stdout
        assert "cancel (at its next durable point)" in shown and doomed.id in shown, shown
        await procs.spawn("--queue", "kids.one_at_a_time")
        assert (await procs.status(control, q1, *ENDED)).status == "CANCELLED"
    counts = procs.counts()
    assert counts["parent cleanup"] == counts["q1 start"] == counts["q1 cleanup"] == 1, counts
    assert counts["q2 start"] == 0 and counts["q1 end"] == 0, counts
    assert procs.pids("q1 cleanup") != {doomed.pid}


async def test_kill_parent_worker__cancel_while_no_worker_serves_it_ends_it_later(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        doomed = await procs.spawn("--queue", "kids.parents")
        await procs.spawn("--queue", "kids.one_at_a_time")
        run = await control.start(
            "kids.parent", [], ["d"], ["q1", "q2"], queue="kids.parents", allow_unknown=True
        )
        q1, q2 = (child_id(run.run_id, "kids.queued", n) for n in (1, 2))
        await procs.held("q1")
        await procs.status(control, run.run_id, "WAITING")  # parked: awaits q1
        doomed.kill()
        await run.cancel()
        shown = run_cli(store_url, "runs", "show", run.run_id).stdout
        assert "a worker serving queue 'kids.parents' to take it" in shown, shown
        assert "cancel (at its next durable point)" in shown, shown
        assert (await control.control.record(q1)).status == "RUNNING"  # not told yet
        await procs.spawn("--queue", "kids.parents")
        assert (await procs.status(control, run.run_id, *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, q1, *ENDED)).status == "CANCELLED"
        assert (await procs.status(control, q2, *ENDED)).status == "CANCELLED"
    counts = procs.counts()
    assert counts["parent start"] == counts["parent cleanup"] == counts["q1 cleanup"] == 1
    assert counts["q2 start"] == 0 and counts["d start"] == 0, counts


async def test_queued_child__cancelled_while_its_parent_awaits_it_ends_at_once(
    tmp_path: Path, store_url: str
) -> None:
    async with kids(tmp_path, store_url) as (procs, control):
        await procs.spawn()
        run = await control.start("kids.parent", [], [], ["q1", "q2"], allow_unknown=True)
        q2 = child_id(run.run_id, "kids.queued", 2)
        await procs.held("q1")
        assert await control.cancel(q2) == cairn.RunStatus.CANCELLED  # queued: ends at once
        procs.release("q1")
        assert await run.result(timeout=20) == ["q1 done", f"failed {q2}"]
    counts = procs.counts()
    assert counts["q2 start"] == 0 and counts["q1 end"] == 1, counts
    assert counts[f"parent saw {q2} cairn.errors.Cancelled"] == 1, counts


PARENTS = 6


async def test_soak__parents_cancelled_and_a_worker_killed_mid_way(
    tmp_path: Path, store_url: str
) -> None:
    """Six parents of two awaited children and a detached one, on two workers; one worker
    is killed with everything in flight, half the parents are cancelled (by the CLI and
    the API) meanwhile, a third worker joins, then every held step is let go."""
    names = {f"p{i}": [f"p{i}a", f"p{i}b", f"p{i}d"] for i in range(PARENTS)}
    cancelled = {"p0", "p2", "p4"}
    async with kids(tmp_path, store_url) as (procs, control):
        doomed = await procs.spawn()
        await procs.spawn()
        for tag, (a, b, d) in names.items():
            await control.start("kids.parent", [a, b], [d], [], tag, run_id=tag, allow_unknown=True)
        await procs.held(*(n for kids_of in names.values() for n in kids_of))
        doomed.kill()
        for tag in sorted(cancelled):
            if tag == "p0":
                done = run_cli(store_url, "runs", "cancel", tag)
                assert done.returncode == 0, done.stderr
            else:
                await control.cancel(tag)
        await procs.spawn()
        procs.release(*(n for kids_of in names.values() for n in kids_of))
        ended = {}
        for tag in names:
            ended[tag] = (await procs.status(control, tag, *ENDED)).status
            for n in (1, 2, 3):
                kid = child_id(tag, n=n)
                ended[kid] = (await procs.status(control, kid, *ENDED)).status
        results = {
            tag: await (await control.get(tag)).result(timeout=1)
            for tag in names
            if tag not in cancelled
        }
    for tag, (a, b, _) in names.items():
        lost = tag in cancelled
        assert ended[tag] == ("CANCELLED" if lost else "COMPLETED")
        assert ended[child_id(tag)] == ended[child_id(tag, n=2)] == ended[tag]
        assert ended[child_id(tag, n=3)] == "COMPLETED"  # detached
        if not lost:
            assert results[tag] == [f"{a} done", f"{b} done"]
    counts = procs.counts()
    for tag, kids_of in names.items():
        lost = tag in cancelled
        assert counts[f"{tag} start"] == 1, counts
        assert counts[f"{tag} cleanup"] == int(lost) and counts[f"{tag} end"] == int(not lost)
        for name in kids_of:
            attached = not name.endswith("d")
            assert counts[f"{name} start"] == 1, (name, counts)
            assert counts[f"{name} cleanup"] == int(lost and attached), (name, counts)
            assert counts[f"{name} end"] == int(not (lost and attached)), (name, counts)
