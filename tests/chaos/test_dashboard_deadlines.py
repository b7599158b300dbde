"""The dashboard's 503 in time when PostgreSQL's connections hang (a FreezingProxy).

A change whose statement is sent on a frozen connection cannot be withdrawn: it reaches
the server once the connection thaws, late. The 503 says so ("may still be made"), and
not "nothing was changed"; a read cut off the same way changed nothing, and says that.
The SQLite side (a write still queued for the lock is withdrawn) is in
tests/dashboard/test_deadlines.py.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from tests.chaos.proxy import FreezingProxy
from tests.dashboard.flows import Flows, status, until

import cairn
from cairn.dashboard import app, target

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

DEADLINE = 1.0  # seconds, for the test (the dashboard's own is target.DEADLINE)


async def test_frozen_database__a_change_cut_off_says_it_may_still_be_made(
    pg_url: str, freezing: FreezingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    flows = Flows(freezing.url(pg_url.rsplit("/", 1)[1]))
    async with flows.engine(workers=0) as engine:
        handle = await engine.start("t.waiter", run_id="frozen")
        transport = httpx.ASGITransport(app=app(engine))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost/api/v1", timeout=30
        ) as api:
            assert freezing.freeze(new=True) > 0
            try:
                started = time.monotonic()
                change = await asyncio.wait_for(api.post("/runs/frozen/cancel"), DEADLINE + 10)
                took = time.monotonic() - started
                read = await asyncio.wait_for(api.get("/runs/frozen"), DEADLINE + 10)
            finally:
                freezing.thaw()
        assert (change.status_code, read.status_code) == (503, 503), (change.text, read.text)
        assert took < DEADLINE + target.GRACE + 1, f"answered in {took:.1f}s"
        assert change.json()["message"].endswith(
            "try again shortly: a change asked for may still be made once it answers"
        )
        assert read.json()["message"].endswith("try again shortly: nothing was changed")
        # Thawed, the cancel the 503 could not withdraw may land: "may" was the truth.
        print("after thaw:", await handle.status())


async def test_lost_commit__a_submission_whose_fate_is_unknown_says_it_may_have_been_made(
    pg_url: str,
) -> None:
    # The reply to a task submission's COMMIT is lost and the network stays down: the
    # dashboard cannot learn whether it committed (it did). The 503 must say the change
    # may have been made, not only "try again": the retry finds the task submitted, once.
    from tests.chaos.proxy import LosingProxy

    from cairn.store.postgres.store import PostgresStore

    flows = Flows(pg_url)
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=0, kinds=("COMMIT",), then_down=True)
    url = proxy.url(pg_url.rsplit("/", 1)[1])
    store = PostgresStore(url, retry_for=1.0)
    try:
        async with (
            flows.engine() as workers,
            cairn.Engine(url, store=store, registry=flows.registry, workers=0) as engine,
        ):
            await workers.start("t.inbox", run_id="lost")
            task = await until("the task", lambda: workers.tasks.list(run_id="lost"))
            path = f"/tasks/{task[0].task_id}/submit"
            body = {"values": {"approved": True}, "by": "ann"}
            proxy.budget = 1
            async with _api(engine) as api:
                first = await asyncio.wait_for(api.post(path, json=body), 20)
            async with _api(workers) as api:
                again = await asyncio.wait_for(api.post(path, json=body), 20)
                done = await status(api, "lost", "COMPLETED")
    finally:
        proxy.close()
    assert dict(proxy.lost) == {"COMMIT": 1}
    assert first.status_code == 503, first.text
    assert first.json()["message"].endswith(
        "try again shortly: the change may have been made (look before making it again)"
    )
    assert again.status_code == 404, again.text
    assert "is not open (it is submitted)" in again.json()["message"]
    assert done["result"] == {"approved": True}


def _api(source: cairn.Engine) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app(source))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost/api/v1", timeout=30)
