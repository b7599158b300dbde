"""A request whose database does not answer gets 503 within the request deadline, on both stores.

The database is held by an outside connection: SQLite's write lock (BEGIN IMMEDIATE), or
a row lock on PostgreSQL. Without a deadline the request waits for as long as the holder
holds, and a change the caller gave up on lands later.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from tests.store.kit import execute

import cairn
from cairn.dashboard import app, target
from cairn.runtime import streams

from .flows import Flows

DEADLINE = 1.0  # seconds, for the test (the dashboard's own is target.DEADLINE)


@contextlib.contextmanager
def held(url: str, run_id: str) -> Iterator[None]:
    """The run's row (PostgreSQL) or the whole file (SQLite) locked by another connection."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    with psycopg.connect(url) as pg:
        pg.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
        try:
            yield
        finally:
            pg.rollback()


async def test_deadline__a_change_the_database_cannot_take_is_503_in_time(
    flows: Flows, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    async with flows.engine(workers=0) as engine:
        handle = await engine.start("t.waiter", run_id="held")
        transport = httpx.ASGITransport(app=app(engine))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost/api/v1", timeout=20
        ) as api:
            with held(flows.url, "held"):
                started = time.monotonic()
                # Without a deadline it waits for the holder: bounded here so the test ends.
                response = await asyncio.wait_for(api.post("/runs/held/cancel"), DEADLINE + 10)
                took = time.monotonic() - started
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "StoreUnavailable"
            assert f"did not answer within {DEADLINE:g}s" in response.json()["message"]
            assert took < DEADLINE + 2, f"answered in {took:.1f}s"
            # The database answers again: so does the dashboard.
            again = await api.post("/runs/held/cancel")
            assert again.status_code == 200, again.text
        assert await handle.status() == cairn.RunStatus.CANCELLED


async def test_live_stream__ends_cleanly_when_the_database_fails(flows: Flows) -> None:
    # A page's live updates when the database goes away: the stream ends (the browser
    # reconnects by itself) with a line saying why, and no exception out of the app.
    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="watched")
        transport = httpx.ASGITransport(app=app(engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as ui:
            await engine.store.close()
            response = await asyncio.wait_for(ui.get("/ui/events?run=watched"), 10)
        assert response.status_code == 200
        assert response.text.startswith("retry: ")
        assert "the database did not answer" in response.text


async def test_run_stream__ends_cleanly_when_the_database_fails(
    flows: Flows, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*args: object, **kwargs: object) -> None:
        raise cairn.StoreUnavailable("the database went away")

    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="streaming")
        transport = httpx.ASGITransport(app=app(engine))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost/api/v1"
        ) as api:
            monkeypatch.setattr(streams, "next_items", failing)  # after the run is found
            response = await asyncio.wait_for(api.get("/runs/streaming/streams/out"), 10)
        assert response.status_code == 200
        assert "the database did not answer (StoreUnavailable" in response.text


async def test_deadline__a_503_in_time_says_whether_the_change_may_still_be_made(
    flows: Flows, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: the change still waits for the write lock at the deadline, so it is withdrawn
    # and the 503 says nothing was changed; once the lock is free nothing of it lands.
    # PostgreSQL: its transaction waits on the row lock, COMMIT not yet sent: withdrawn too
    # (a change whose COMMIT, or lone statement, was sent says it may still be made:
    # tests/chaos/test_dashboard_deadlines.py).
    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="held")
        async with _client(engine) as api:
            with held(flows.url, "held"):
                answers = [
                    await asyncio.wait_for(api.post(path, json=body), DEADLINE + 10)
                    for path, body in [
                        ("/runs/held/cancel", None),
                        ("/runs/held/pause", None),
                        ("/runs/held/events/go", {"payload": 1}),
                    ]
                ]
            # Any write queued meanwhile would be made before (or with) this one.
            await engine.start("t.waiter", run_id="after")
        messages = [answer.json()["message"] for answer in answers]
        assert [a.status_code for a in answers] == [503] * 3, messages
        record = await engine.control.record("held")
    events = execute(flows.url, "SELECT COUNT(*) FROM messages WHERE run_id = 'held'")
    unchanged = ["nothing was changed" in m for m in messages]
    assert unchanged == [True] * 3, messages
    assert record.status == "PENDING", record  # neither cancelled nor paused
    assert events == [(0,)], events


async def test_deadline__a_change_withdrawn_on_a_clients_loop_is_not_made_later(
    flows: Flows, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dashboard over a Client: the work runs on the Client's own loop thread, and is
    # cancelled there. The same promise: "nothing was changed" means nothing lands.
    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="held")
    with cairn.Client(flows.url) as client:
        transport = httpx.ASGITransport(app=app(client))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost/api/v1", timeout=20
        ) as api:
            with held(flows.url, "held"):
                answer = await asyncio.wait_for(api.post("/runs/held/cancel"), DEADLINE + 10)
            # Any write queued meanwhile would be made before (or with) this one.
            await asyncio.to_thread(client.send_event, "held", "other", None)
        record = await asyncio.to_thread(client._call, client.control.record("held"))
    message = answer.json()["message"]
    assert answer.status_code == 503, message
    if flows.url.startswith("sqlite"):
        assert message.endswith("try again shortly: nothing was changed")
    if message.endswith("nothing was changed"):
        assert record.status == "PENDING", record
    else:
        assert message.endswith("a change asked for may still be made once it answers")


async def test_deadline__a_page_form_the_database_cannot_take_comes_back_filled_in(
    flows: Flows, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a bare 503 page, and the payload typed into the event form was lost.
    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    async with flows.engine(workers=0) as engine:
        await engine.start("t.waiter", run_id="held")
        async with _client(engine, "http://localhost") as pages:
            token = "t" * 32
            pages.cookies.set("cairn_csrf", token)
            form = {"csrf": token, "name": "go", "payload": '{"typed": "<by hand>"}'}
            with held(flows.url, "held"):
                response = await asyncio.wait_for(
                    pages.post("/runs/held/event", data=form), DEADLINE + 10
                )
            assert response.status_code == 503, response.text
            page = response.text
            assert 'action="/runs/held/event"' in page
            assert f"did not answer within {DEADLINE:g}s" in page
            assert 'name="name" value="go"' in page
            assert "{&#34;typed&#34;: &#34;&lt;by hand&gt;&#34;}</textarea>" in page
            assert page.count('name="csrf"') == 1


def _client(engine: cairn.Engine, base_url: str = "http://localhost/api/v1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app(engine))
    return httpx.AsyncClient(transport=transport, base_url=base_url, timeout=20)
