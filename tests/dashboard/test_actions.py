"""Steering runs over HTTP: cancel, pause, resume, retry, restart, fork, events, bulk."""

from __future__ import annotations

from typing import Any

import pytest

from .flows import start, status, until

pytestmark = pytest.mark.process


async def test_cancel__a_waiting_run_ends_cancelled_and_a_second_cancel_is_fine(api, workers):
    run_id = await start(api, "t.waiter", run_id="c1")
    await status(api, run_id, "WAITING")
    response = await api.post("/runs/c1/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["run_id"] == "c1"
    assert response.json()["action"] == "cancel"
    await status(api, run_id, "CANCELLED")
    again = await api.post("/runs/c1/cancel")
    assert again.status_code == 200
    assert again.json()["status"] == "CANCELLED"


async def test_verbs__a_finished_run_is_409_and_an_unknown_one_404(api, workers):
    await start(api, "t.total", 1, 2, run_id="done")
    await status(api, "done", "COMPLETED")
    for verb in ("cancel", "pause", "resume", "retry"):
        response = await api.post(f"/runs/done/{verb}")
        assert response.status_code == 409, (verb, response.text)
        assert response.json()["error"] == "RunFinished"
        assert "'done'" in response.json()["message"]
    for verb in ("cancel", "pause", "resume", "retry", "restart"):
        response = await api.post(f"/runs/ghost/{verb}")
        assert response.status_code == 404, (verb, response.text)
        assert response.json() == {"error": "RunNotFound", "message": "run 'ghost' not found"}
    assert (await api.get("/runs/done")).json()["status"] == "COMPLETED"


async def test_verbs__a_continued_run_is_409_naming_the_newest_run_of_its_chain(
    server, api, workers
):
    await start(api, "t.relay", 0, run_id="r0")
    first = await status(api, "r0", "CONTINUED")
    newest = first["continued_to"]
    await status(api, newest, "WAITING")
    for verb in ("cancel", "pause", "resume"):
        response = await api.post(f"/runs/r0/{verb}")
        assert response.status_code == 409, (verb, response.text)
        assert response.json() == {
            "error": "RunFinished",
            # Short: it was two run ids and 110 characters, wrapping wherever shown.
            "message": f"continued as new: {newest} (WAITING)",
        }
    assert (await api.get(f"/runs/{newest}")).json()["control"] is None
    # Its page: no step, and none to come ("No steps yet." said otherwise).
    page = (await api.get(f"{server.url}/runs/r0")).text
    assert '<p class="muted" data-field="no-steps">No steps.</p>' in page


async def test_verbs__a_body_other_than_an_empty_object_is_400(api, workers):
    await start(api, "t.waiter", run_id="w")
    response = await api.post("/runs/w/cancel", json={"force": True})
    assert response.status_code == 400
    assert "unknown field 'force'" in response.json()["message"]
    assert (await api.get("/runs/w")).json()["control"] is None


async def test_pause_and_resume__a_sleeping_run(api, workers):
    await start(api, "t.sleeper", run_id="s1")
    await status(api, "s1", "SLEEPING")
    paused = await api.post("/runs/s1/pause")
    assert paused.status_code == 200
    assert paused.json()["status"] == "PAUSED"
    assert (await api.get("/runs/s1")).json()["waiting"]["kind"] == "resume"
    resumed = await api.post("/runs/s1/resume")
    assert resumed.status_code == 200
    await status(api, "s1", "SLEEPING")


async def test_retry_restart_and_fork(api, workers, flows):
    await start(api, "t.broken", run_id="b1")
    failed = await status(api, "b1", "FAILED")
    assert "not fixed yet" in failed["error"]["message"]
    flows.fixed = True

    retried = await api.post("/runs/b1/retry")
    assert retried.status_code == 200, retried.text
    done = await status(api, "b1", "COMPLETED")
    assert done["result"] == "fixed"

    restarted = await api.post("/runs/b1/restart")
    assert restarted.status_code == 201
    assert restarted.json()["source"] == "b1"
    new_id = restarted.json()["run_id"]
    assert new_id != "b1"
    assert (await status(api, new_id, "COMPLETED"))["result"] == "fixed"

    forked = await api.post("/runs/b1/fork", json={"from_step": 2})
    assert forked.status_code == 201, forked.text
    assert forked.json()["from_step"] == 2
    fork_id = forked.json()["run_id"]
    await status(api, fork_id, "COMPLETED")
    history = (await api.get(f"/runs/{fork_id}/history")).json()["history"]
    assert [e["key"] for e in history] == ["add#1", "flaky#1"]


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({}, 400, "needs field 'from_step'"),
        ({"from_step": "2"}, 400, "from_step must be an integer, got string"),
        ({"from_step": True}, 400, "from_step must be an integer, got boolean"),
        ({"from_step": 0}, 422, "has no history entry 0"),
        ({"from_step": 9}, 422, "its entries: 1 to 2"),
    ],
)
async def test_fork__bad_from_step(api, workers, body, code, fragment):
    await start(api, "t.total", 1, 1, run_id="f1")
    await status(api, "f1", "COMPLETED")
    response = await api.post("/runs/f1/fork", json=body)
    assert response.status_code == code, response.text
    assert fragment in response.json()["message"]


async def test_events__queued_then_consumed_by_the_wait(api, workers):
    await start(api, "t.waiter", run_id="e1")
    response = await api.post(
        "/runs/e1/events/go", json={"payload": {"ok": True}, "idempotency_key": "k1"}
    )
    assert response.status_code == 202, response.text
    assert response.json()["event"] == "go"
    done = await status(api, "e1", "COMPLETED")
    assert done["result"] == {"ok": True}


async def test_events__unknown_run_404_finished_409_bad_name_422_bad_key_400(api, workers):
    unknown = await api.post("/runs/ghost/events/go", json={"payload": 1})
    assert unknown.status_code == 404
    await start(api, "t.total", 1, 1, run_id="fin")
    await status(api, "fin", "COMPLETED")
    finished = await api.post("/runs/fin/events/go", json={"payload": 1})
    assert finished.status_code == 409
    assert finished.json()["error"] == "RunFinished"
    long_name = await api.post(f"/runs/fin/events/{'n' * 300}", json={})
    assert long_name.status_code == 422
    assert long_name.json()["error"] == "InvalidName"
    bad_key = await api.post("/runs/fin/events/go", json={"idempotency_key": 5})
    assert bad_key.status_code == 400


async def test_bulk_cancel__by_ids_reports_each_run(api, workers):
    for n in (1, 2):
        await start(api, "t.waiter", run_id=f"w{n}")
    await start(api, "t.total", 1, 1, run_id="done")
    await status(api, "done", "COMPLETED")
    response = await api.post("/runs/cancel", json={"ids": ["w1", "w2", "done", "ghost"]})
    assert response.status_code == 200, response.text
    results = {r["run_id"]: r for r in response.json()["results"]}
    assert results["w1"]["ok"] and results["w2"]["ok"]
    assert results["done"] == {
        "run_id": "done",
        "ok": False,
        "error": "RunFinished",
        "message": "run 'done' already finished (COMPLETED; nothing to cancel)",
    }
    assert results["ghost"]["error"] == "RunNotFound"
    assert response.json()["more"] is False
    for n in (1, 2):
        await status(api, f"w{n}", "CANCELLED")


async def test_bulk_cancel__by_filter_with_a_limit(api, workers):
    for n in range(3):
        await start(api, "t.waiter", run_id=f"w{n}")
    await start(api, "t.total", 5, 5, run_id="other")
    for n in range(3):
        await status(api, f"w{n}", "WAITING")
    first = await api.post(
        "/runs/cancel", json={"filter": {"workflow": "t.waiter", "status": "WAITING"}, "limit": 2}
    )
    assert first.status_code == 200, first.text
    assert len(first.json()["results"]) == 2
    assert first.json()["more"] is True
    for n in range(3):
        await status(api, f"w{n}", "WAITING", "CANCELLED")

    async def cancelled_two():
        runs = (await api.get("/runs", params={"status": "CANCELLED"})).json()["runs"]
        return len(runs) == 2

    await until("two cancelled runs", cancelled_two)
    rest = await api.post(
        "/runs/cancel", json={"filter": {"workflow": "t.waiter", "status": "WAITING"}}
    )
    assert [r["ok"] for r in rest.json()["results"]] == [True]
    assert rest.json()["more"] is False
    assert (await status(api, "other", "COMPLETED"))["status"] == "COMPLETED"


async def test_bulk_retry__by_filter(api, workers, flows):
    for n in range(2):
        await start(api, "t.broken", run_id=f"b{n}")
    for n in range(2):
        await status(api, f"b{n}", "FAILED")
    flows.fixed = True
    response = await api.post("/runs/retry", json={"filter": {"status": "FAILED"}})
    assert response.status_code == 200
    assert sorted(r["run_id"] for r in response.json()["results"] if r["ok"]) == ["b0", "b1"]
    for n in range(2):
        await status(api, f"b{n}", "COMPLETED")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "exactly one of 'ids' and 'filter'"),
        ({"ids": ["a"], "filter": {"status": "FAILED"}}, "exactly one of 'ids' and 'filter'"),
        ({"filter": {}}, "filter must name at least one of"),
        ({"filter": {"colour": "red"}}, "unknown filter 'colour'"),
        ({"filter": {"status": "DONE"}}, "unknown run status"),
        ({"ids": "a"}, "ids must be an array"),
        ({"ids": [1]}, "every id must be a string"),
        ({"ids": ["a"], "limit": 1}, "'limit' goes with 'filter'"),
        ({"filter": {"status": "FAILED"}, "limit": 0}, "limit must be between 1 and 1000"),
    ],
)
async def test_bulk__unreadable_bodies_are_400(unchanging_api, body, fragment):
    response = await unchanging_api.post("/runs/cancel", json=body)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]


async def test_events__one_no_wait_takes_is_kept_and_the_reply_says_so(api, workers):
    await start(api, "t.waiter", run_id="e2")
    await status(api, "e2", "WAITING")

    typo = await api.post("/runs/e2/events/og", json={"payload": 1})

    assert typo.status_code == 202, typo.text
    assert typo.json() == {
        "run_id": "e2",
        "event": "og",
        "status": "WAITING",
        "awaited": False,
        "repeated": False,
        "waits_for": ["event 'go'"],
        "note": "run e2 is not waiting for event 'og' (it waits for event 'go'); "
        "the event is kept for a later wait",
    }
    assert (await api.get("/runs/e2")).json()["status"] == "WAITING"
    right = await api.post("/runs/e2/events/go", json={"payload": 2})
    assert (right.json()["awaited"], right.json()["note"]) == (True, None)
    assert (await status(api, "e2", "COMPLETED"))["result"] == 2


async def test_pause_withdrawn_by_resume_during_a_step__the_run_goes_on(api, workers, flows):
    # Pause and Resume pressed while a worker of another process is inside a step: the
    # worker has seen the pause, then the resume withdraws it before the step ends. The
    # run must go on; it used to park PAUSED though its control said nothing was pending.
    await start(api, "t.held", run_id="pr")

    async def live() -> Any:
        return workers.worker.executions.live.get("pr")

    run = await until("the run executing", live)
    assert (await api.post("/runs/pr/pause")).status_code == 200

    async def pause_seen() -> bool:
        return bool(run.interrupts.pause)

    await until("the worker seeing the pause", pause_seen)
    resumed = await api.post("/runs/pr/resume")
    assert resumed.json()["requested"] is None

    async def pause_withdrawn() -> bool:
        return not run.interrupts.pause

    await until("the worker seeing the resume", pause_withdrawn)
    flows.release.set()
    finished = await status(api, "pr", "COMPLETED", "PAUSED")
    assert finished["status"] == "COMPLETED"
