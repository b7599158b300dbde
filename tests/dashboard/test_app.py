"""`cairn.dashboard.app()` in-process: on an Engine, a Client or a RunControl, and its 5xx."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

import cairn
from cairn.dashboard import app, create_app
from cairn.errors import StoreUnavailable

from .flows import Flows


def client_on(asgi) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi), base_url="http://localhost/api/v1"
    )


async def test_app__on_an_engine_that_executes_runs(flows: Flows):
    async with flows.engine() as engine:
        async with client_on(app(engine)) as api:
            started = await api.post("/runs", json={"workflow": "t.total", "args": [1, 2]})
            assert started.status_code == 201
            run_id = started.json()["run_id"]
            await (await engine.get(run_id)).result(timeout=10)
            run = (await api.get(f"/runs/{run_id}")).json()
            assert run["result"]["total"] == 3


async def test_app__on_a_client_calls_go_to_the_clients_own_loop(flows: Flows):
    client = await asyncio.to_thread(cairn.Client, flows.url, registry=flows.registry)
    try:
        async with flows.engine(), client_on(app(client, token="t")) as api:
            headers = {"Authorization": "Bearer t"}
            started = await api.post(
                "/runs", json={"workflow": "t.total", "args": [4, 5]}, headers=headers
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run_id"]
            result = await asyncio.to_thread(client.get(run_id).result, 10)
            assert result["total"] == 9
            listed = (await api.get("/runs", headers=headers)).json()["runs"]
            assert [r["run_id"] for r in listed] == [run_id]
            assert (await api.get("/runs")).status_code == 401
    finally:
        await asyncio.to_thread(client.close)


async def test_app__unexpected_failures_are_500_and_logged_not_sent(flows: Flows, caplog):
    async with flows.engine(workers=0) as engine:
        control = engine.control

        async def broken(*args, **kwargs):
            raise RuntimeError("password=hunter2 at db.internal")

        async def unavailable(*args, **kwargs):
            raise StoreUnavailable("db.internal:5432 refused the connection")

        async with client_on(create_app(control)) as api:
            control.list_runs = broken  # type: ignore[method-assign]
            with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
                response = await api.get("/runs")
            assert response.status_code == 500
            assert response.json() == {
                "error": "InternalError",
                "message": "the dashboard failed to answer; the reason is in its log",
            }
            assert "hunter2" in caplog.text
            control.list_runs = unavailable  # type: ignore[method-assign]
            response = await api.get("/runs")
            assert response.status_code == 503
            assert response.json()["error"] == "StoreUnavailable"
            assert "db.internal" not in response.text


def test_app__takes_only_an_engine_client_or_control():
    with pytest.raises(TypeError, match=r"cairn\.Engine, cairn\.Client or RunControl"):
        app("sqlite:///cairn.db")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token must not be empty"):
        app(cairn.Engine("sqlite:///:memory:", workers=0), token="")


async def test_app__mounted_under_a_prefix_pages_links_and_login_follow_it(flows: Flows):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    async with flows.engine() as engine:
        run = await engine.start("t.total", 1, 2, run_id="mounted")
        await run.result(timeout=10)
        outer = Starlette(routes=[Mount("/ops", app=app(engine, token="t0ken"))])
        transport = httpx.ASGITransport(app=outer)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as web:
            first = await web.get("/ops/runs/mounted")
            assert first.status_code == 303
            assert first.headers["location"] == "/ops/login?next=%2Fruns%2Fmounted"
            login = await web.get(first.headers["location"])
            assert 'action="/ops/login"' in login.text
            assert 'href="/ops/static/cairn.css"' in login.text
            csrf = login.text.split('name="csrf" value="')[1].split('"')[0]
            done = await web.post(
                "/ops/login", data={"csrf": csrf, "token": "t0ken", "next": "/runs/mounted"}
            )
            assert done.status_code == 303
            assert done.headers["location"] == "/ops/runs/mounted"
            assert "Path=/ops" in done.headers["set-cookie"]
            page = await web.get("/ops/runs/mounted")
            assert page.status_code == 200
            assert 'action="/ops/runs/mounted/restart"' in page.text
            listing = await web.get("/ops/")
            assert 'href="/ops/runs/mounted"' in listing.text
            assert (await web.get("/ops/static/cairn.js")).status_code == 200
            api = await web.get("/ops/api/v1/runs", headers={"Authorization": "Bearer t0ken"})
            assert api.json()["runs"][0]["run_id"] == "mounted"
