"""Finding runs over HTTP and on the runs page: id prefix, time range, origin, counts."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import httpx
import pytest

from .flows import start, status

pytestmark = pytest.mark.process


@pytest.fixture
async def web(server):
    """A client on the pages."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


def listed(page: httpx.Response) -> list[str]:
    return re.findall(r'<tr data-run-id="([^"]+)"', page.text)


async def _fill(api: httpx.AsyncClient) -> dict[str, str]:
    """inv-1, inv-2, inv-10 completed, rcpt-1 failed, and a restart of inv-1."""
    for run_id in ("inv-1", "inv-2", "inv-10"):
        await start(api, "t.total", 1, 2, run_id=run_id)
    await start(api, "t.broken", run_id="rcpt-1")
    for run_id in ("inv-1", "inv-2", "inv-10"):
        await status(api, run_id, "COMPLETED")
    await status(api, "rcpt-1", "FAILED")
    restarted = await api.post("/runs/inv-1/restart")
    assert restarted.status_code == 201
    again = restarted.json()["run_id"]
    await status(api, again, "COMPLETED")
    return {"restart": again}


async def test_api__runs_by_prefix_origin_and_time_with_counts(api, workers):
    made = await _fill(api)

    found = (await api.get("/runs", params={"run_id_prefix": "inv-1", "counts": "true"})).json()
    assert [r["run_id"] for r in found["runs"]] == ["inv-10", "inv-1"]
    assert found["counts"]["COMPLETED"] == 2
    assert found["counts"]["FAILED"] == 0
    assert found["counts_exact"] is True
    assert set(found["counts"]) == {
        "PENDING", "RUNNING", "SLEEPING", "WAITING", "PAUSED",
        "COMPLETED", "FAILED", "CANCELLED", "CONTINUED",
    }  # fmt: skip
    everything = (await api.get("/runs", params={"status": "failed", "counts": "true"})).json()
    assert [r["run_id"] for r in everything["runs"]] == ["rcpt-1"]
    assert everything["counts"]["COMPLETED"] == 4  # the status filter is not counted
    assert "counts" not in (await api.get("/runs")).json()

    restarts = (await api.get("/runs", params={"origin": "restart"})).json()["runs"]
    assert [(r["run_id"], r["origin"]) for r in restarts] == [(made["restart"], "restart")]
    by_api = (await api.get("/runs", params={"origin": "API"})).json()["runs"]
    assert {r["run_id"] for r in by_api} == {"inv-1", "inv-2", "inv-10", "rcpt-1"}
    assert (await api.get("/runs/inv-1")).json()["origin"] == "api"

    created = {
        r["run_id"]: datetime.fromisoformat(r["created_at"]).timestamp()
        for r in (await api.get("/runs")).json()["runs"]
    }
    # Less a microsecond: the ISO times are rounded to it.
    window = {"since": created["inv-2"] - 1e-6, "until": created["inv-10"] - 1e-6}
    between = (await api.get("/runs", params=window)).json()["runs"]
    assert [r["run_id"] for r in between] == ["inv-2"]

    for params, wanted in (
        ({"origin": "cron"}, "unknown run origin 'cron'"),
        ({"until": "yesterday"}, "until must be epoch seconds or an ISO 8601 time"),
        ({"counts": "maybe"}, "counts must be true or false"),
    ):
        response = await api.get("/runs", params=params)
        assert response.status_code == 400, response.text
        assert wanted in response.json()["message"]
    # PostgreSQL refuses a NUL even in a filter (that was a 500 there): the name rule's 422.
    for params, wanted in (
        ({"workflow": "a\x00b"}, "workflow 'a\\x00b' contains a NUL"),
        ({"version": "a\x00b"}, "version 'a\\x00b' contains a NUL"),
    ):
        response = await api.get("/runs", params=params)
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "InvalidName"
        assert wanted in response.json()["message"]
    # A prefix is a name: one no run id can start with is the name rule's 422.
    empty = await api.get("/runs", params={"run_id_prefix": ""})
    assert empty.status_code == 422, empty.text
    assert empty.json() == {
        "error": "InvalidName",
        "message": "run_id_prefix must be a non-empty string, got ''",
    }


async def test_runs_page__search_filters_and_counts_per_status(web, api, workers):
    made = await _fill(api)

    page = await web.get("/", params={"run_id_prefix": "inv-1"})
    assert listed(page) == ["inv-10", "inv-1"]
    assert 'value="inv-1"' in page.text  # the search box keeps what was asked
    counts = dict(
        re.findall(r'data-status="(\w*)"[^>]*>.*?<span class="n">([\d,]+)</span>', page.text)
    )
    assert counts[""] == "2" and counts["COMPLETED"] == "2" and counts["FAILED"] == "0"

    failed = await web.get("/", params={"status": "FAILED"})
    assert listed(failed) == ["rcpt-1"]
    counts = dict(
        re.findall(r'data-status="(\w*)"[^>]*>.*?<span class="n">([\d,]+)</span>', failed.text)
    )
    assert counts["COMPLETED"] == "4" and counts["FAILED"] == "1" and counts[""] == "5"
    # Each count is a link to that status, keeping the other filters.
    link = re.search(r'<a href="([^"]*)" class="count[^"]*" data-status="COMPLETED"', page.text)
    assert link and "run_id_prefix=inv-1" in link[1] and "status=COMPLETED" in link[1]

    restarted = await web.get("/", params={"origin": "restart"})
    assert listed(restarted) == [made["restart"]]
    assert "by restart" in restarted.text
    assert '<option value="restart" selected>' in restarted.text

    created = [
        datetime.fromisoformat(r["created_at"]) for r in (await api.get("/runs")).json()["runs"]
    ]
    # What a datetime-local input sends: the dashboard's local time, to the second.
    first = min(created).astimezone().replace(microsecond=0, tzinfo=None)
    last = max(created).astimezone().replace(microsecond=0, tzinfo=None)
    every = {"since": first.isoformat(), "until": (last + timedelta(seconds=1)).isoformat()}
    assert len(listed(await web.get("/", params=every))) == 5
    assert listed(await web.get("/", params={"until": first.isoformat()})) == []
    assert 'name="since" value="' + every["since"] in (await web.get("/", params=every)).text

    bad = await web.get("/", params={"origin": "cron"})
    assert "unknown run origin" in bad.text


async def test_counts__past_the_limit_are_lower_bounds(monkeypatch):
    from cairn.dashboard.api import runs as api_runs
    from cairn.dashboard.ui import runs as ui_runs
    from cairn.testing import TestEngine

    monkeypatch.setattr(api_runs, "COUNT_LIMIT", 3)
    async with TestEngine() as env:
        control = env.engine.control
        for n in range(6):
            await control.start("nowhere.known", run_id=f"r{n}", allow_unknown=True)
        await control.cancel("r5")
        everything = await api_runs.count(control, {})
        filtered = await api_runs.count(control, {"run_id_prefix": "r"})
        few = await api_runs.count(control, {"run_id_prefix": "r1"})

    # No filter: each status counted up to the limit (+1); only the one past it is a bound.
    assert everything.by_status["PENDING"] == 4 and everything.by_status["CANCELLED"] == 1
    assert (everything.lower_bounds, everything.exact) == ({"PENDING"}, False)
    shown = {c["status"]: c["count"] for c in ui_runs.status_counts(everything, {}, "")}
    assert (shown[""], shown["PENDING"], shown["CANCELLED"], shown["FAILED"]) == (
        "5+",
        "4+",
        "1",
        "0",
    )
    # Under filters: 4 of the 6 counted, in all; every count found is a lower bound.
    assert (filtered.total, filtered.exact) == (4, False)
    assert filtered.lower_bounds == {s for s, n in filtered.by_status.items() if n}
    assert (few.total, few.exact, few.lower_bounds) == (1, True, frozenset())
