"""What an operator saw stays, over HTTP and on the run page: every execution of a retried
run, who asked, where copies came from, and the step executing now."""

from __future__ import annotations

import re

import httpx
import pytest

from .flows import start, status, until
from .test_ui_pages import csrf_of

pytestmark = pytest.mark.process


@pytest.fixture
async def web(server):
    """A browser-like client on the pages."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


async def test_retry__the_history_keeps_every_execution_and_who_asked(api, web, workers, flows):
    await start(api, "t.broken", run_id="b1")
    await status(api, "b1", "FAILED")
    retried = await api.post("/runs/b1/retry", json={"by": "ada"})
    assert retried.status_code == 200, retried.text
    assert (retried.json()["execution"], retried.json()["by"]) == (2, "ada")
    await status(api, "b1", "FAILED")  # not fixed yet: execution 2 fails too
    flows.fixed = True
    page = await web.get("/runs/b1")
    posted = await web.post("/runs/b1/retry", data={"csrf": csrf_of(page), "confirmed": "yes"})
    assert posted.status_code == 303, posted.text
    await status(api, "b1", "COMPLETED")

    found = (await api.get("/runs/b1/history")).json()
    shown = [(e["execution"], e["key"], e["status"], e["superseded"]) for e in found["history"]]
    assert shown == [
        (1, "add#1", "completed", False),
        (1, "flaky#1", "failed", True),
        (2, "flaky#1", "failed", True),
        (3, "flaky#1", "completed", False),
    ]
    assert all("not fixed yet" in e["error"]["traceback"] for e in found["history"][1:3])
    attempts = [(a["execution"], a["key"], a["outcome"]) for a in found["attempts"]]
    assert attempts == [(1, "flaky#1", "failed"), (2, "flaky#1", "failed")]
    assert [(e["execution"], e["cause"], e["by"]) for e in found["executions"]] == [
        (1, "start", None),
        (2, "retry", "ada"),
        (3, "retry", "dashboard"),
    ]
    assert (await api.get("/runs/b1")).json()["execution"] == 3
    text = re.sub(r"\s+", " ", (await web.get("/runs/b1")).text)
    assert "Execution 1, started at " in text
    assert "Execution 2, after retry by ada at " in text
    assert "Execution 3, after retry by dashboard at " in text
    assert text.count("not fixed yet") >= 2  # both failures, each with its traceback


async def test_restart_and_fork__say_where_they_came_from(api, web, workers, flows):
    flows.fixed = True
    await start(api, "t.broken", run_id="src")
    await status(api, "src", "COMPLETED")
    restarted = await api.post("/runs/src/restart", json={"by": "bob"})
    forked = await api.post("/runs/src/fork", json={"from_step": 2})
    assert (restarted.status_code, forked.status_code) == (201, 201), forked.text
    assert (restarted.json()["by"], forked.json()["by"]) == ("bob", "api")
    new_id, fork_id = restarted.json()["run_id"], forked.json()["run_id"]

    again = await status(api, new_id, "COMPLETED")
    fork = await status(api, fork_id, "COMPLETED")
    source = (await api.get("/runs/src")).json()
    listed = {r["run_id"]: r for r in (await api.get("/runs")).json()["runs"]}

    assert (again["restarted_from"], again["executions"][0]["by"]) == ("src", "bob")
    assert (fork["forked_from"], fork["forked_from_seq"]) == ("src", 2)
    assert [(c["run_id"], c["how"]) for c in source["copies"]] == [
        (new_id, "restart"),
        (fork_id, "fork"),
    ]
    assert listed[new_id]["restarted_from"] == "src" and listed[fork_id]["forked_from"] == "src"
    page = re.sub(r"\s+", " ", (await web.get(f"/runs/{new_id}")).text)
    assert "Restarted from</dt>" in page and "by bob at " in page
    assert fork_id in (await web.get("/runs/src")).text


@pytest.mark.parametrize(
    ("verb", "body", "code", "fragment"),
    [
        ("retry", {"by": ""}, 422, "by must be a non-empty string"),
        ("retry", {"by": 7}, 400, "by must be a string"),
        ("restart", {"by": "x" * 300}, 422, "the limit is 255"),
        ("fork", {"from_step": 1, "by": None}, 400, "by must be a string"),
        ("restart", {"who": "ada"}, 400, "unknown field 'who'"),
    ],
)
async def test_recorded_verbs__a_bad_by_changes_nothing(api, workers, verb, body, code, fragment):
    await start(api, "t.broken", run_id="b2")
    await status(api, "b2", "FAILED")
    response = await api.post(f"/runs/b2/{verb}", json=body)
    assert response.status_code == code, response.text
    assert fragment in response.json()["message"]
    assert [r["run_id"] for r in (await api.get("/runs")).json()["runs"]] == ["b2"]
    assert (await api.get("/runs/b2")).json()["execution"] == 1


async def test_executing__the_step_that_runs_now_shows_with_its_worker(api, web, workers, flows):
    await start(api, "t.held", run_id="h1")

    async def executing() -> list[dict[str, object]]:
        found: list[dict[str, object]] = (await api.get("/runs/h1")).json()["executing"]
        return found

    [step] = await until("the executing step", executing)
    history = (await api.get("/runs/h1/history")).json()
    page = re.sub(r"\s+", " ", (await web.get("/runs/h1")).text)
    flows.release.set()
    await status(api, "h1", "COMPLETED")
    after = await executing()

    assert (step["key"], step["name"], step["attempt"]) == ("held#1", "held", 1)
    assert step["worker"] == workers.worker.env.owner
    assert step["started_at"] and step["heartbeat_at"]
    assert history["executing"] == [step]
    assert "Executing</dt>" in page and "held#1" in page
    assert 'class="entry-executing"' in page  # the timeline's last entry, executing now
    assert after == []
