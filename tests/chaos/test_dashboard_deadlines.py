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
from tests.dashboard.flows import Flows

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
