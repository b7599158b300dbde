"""Schedules, queue limits and workers over HTTP."""

from __future__ import annotations

import re

import httpx
import pytest

from .flows import status

pytestmark = pytest.mark.process


async def test_schedules__list_pause_resume_trigger(api, workers):
    await workers.schedules.create("nightly", "t.total", every="1h", args=[1, 2])
    listed = (await api.get("/schedules")).json()["schedules"]
    assert [(s["id"], s["workflow"], s["every"], s["paused"]) for s in listed] == [
        ("nightly", "t.total", 3600.0, False)
    ]
    assert listed[0]["args"] == [1, 2]
    assert (await api.get("/schedules/nightly")).json() == listed[0]

    paused = await api.post("/schedules/nightly/pause")
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    resumed = await api.post("/schedules/nightly/resume")
    assert resumed.json()["paused"] is False
    assert resumed.json()["next_tick"] is not None

    triggered = await api.post("/schedules/nightly/trigger")
    assert triggered.status_code == 201, triggered.text
    assert triggered.json()["schedule_id"] == "nightly"
    run = await status(api, triggered.json()["run_id"], "COMPLETED")
    assert run["result"]["total"] == 3


async def test_schedules__unknown_is_404(api):
    assert (await api.get("/schedules")).json() == {"schedules": []}
    for method, path in (
        ("GET", "/schedules/ghost"),
        ("POST", "/schedules/ghost/pause"),
        ("POST", "/schedules/ghost/resume"),
        ("POST", "/schedules/ghost/trigger"),
    ):
        response = await api.request(method, path)
        assert response.status_code == 404, (path, response.text)
        assert response.json() == {
            "error": "ScheduleNotFound",
            "message": "schedule 'ghost' not found",
        }


async def test_queues__update_live_and_list(api):
    assert (await api.get("/queues")).json() == {"queues": []}
    made = await api.post("/queues/mail", json={"concurrency": 2, "rate": "10/1m"})
    assert made.status_code == 200, made.text
    assert made.json() == {
        "name": "mail",
        "concurrency": 2,
        "per_worker": None,
        "rate": "10/60s",
        "partition_concurrency": None,
    }
    changed = await api.post("/queues/mail", json={"concurrency": None, "per_worker": 1})
    assert changed.json()["concurrency"] is None
    assert changed.json()["per_worker"] == 1
    assert changed.json()["rate"] == "10/60s"
    assert (await api.get("/queues")).json()["queues"] == [changed.json()]


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({}, 400, "names no limit to change"),
        ({"speed": 1}, 400, "unknown field 'speed'"),
        ({"concurrency": "2"}, 400, "concurrency must be an integer or null, got string"),
        ({"rate": 10}, 400, "rate must be a string or null, got number"),
        ({"concurrency": 0}, 422, "invalid concurrency of queue 'mail'"),
        ({"rate": "fast"}, 422, "fast"),
    ],
)
async def test_queues__bad_limits(unchanging_api, body, code, fragment):
    api = unchanging_api
    response = await api.post("/queues/mail", json=body)
    assert response.status_code == code, response.text
    assert fragment in response.json()["message"]
    assert (await api.get("/queues")).json() == {"queues": []}


async def test_workers__lists_the_engine_that_executes_runs(api, workers):
    listed = (await api.get("/workers")).json()["workers"]
    assert [w["worker_id"] for w in listed] == [workers.worker.env.owner]
    worker = listed[0]
    assert worker["alive"] is True
    assert worker["concurrency"] == 8
    assert "t.total" in worker["workflows"]
    await workers.close()
    assert (await api.get("/workers")).json()["workers"] == []


async def test_workers__none_when_no_engine_runs(api):
    assert (await api.get("/workers")).json() == {"workers": []}


async def test_queues__page_counts_every_queued_run_exactly(server, flows):
    async with flows.engine(workers=0) as starter:  # queues runs, executes none
        for i in range(1003):  # more than a page of runs, which once capped the count
            await starter.start("t.add", i, 1, queue="backlog", allow_unknown=True)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as web:
        page = await web.get("/queues")
    assert page.status_code == 200
    row = re.search(r'<tr data-queue="backlog">(.*?)</tr>', page.text, re.S)
    assert row is not None, page.text
    running, queued = re.findall(r"<td>(\d+)</td>", row.group(1))[:2]
    assert (running, queued) == ("0", "1003")
