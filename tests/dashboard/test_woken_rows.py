"""A parked run woken with no worker to take it, as the runs page lists it (both stores)."""

from __future__ import annotations

import pytest

from .flows import Flows, start, status

pytestmark = pytest.mark.process


async def test_runs_page__a_woken_run_says_it_waits_for_a_worker(server, api, flows: Flows):
    # The run parks, its worker stops, then a cancel reaches it: it stays WAITING, due
    # for a worker to end it CANCELLED. Its row's "Waiting for" was blank.
    async with flows.engine():
        await start(api, "t.waiter", run_id="parked")
        await status(api, "parked", "WAITING")
    cancel = await api.post("/runs/parked/cancel")
    assert cancel.status_code == 200, cancel.text
    assert (await api.get("/runs/parked")).json()["status"] == "WAITING"
    page = (await api.get(f"{server.url}/")).text
    row = page[page.index('data-run-id="parked"') :].split("</tr>")[0]
    assert 'data-field="waiting" title="a worker to take it (it is due)"' in row, row
