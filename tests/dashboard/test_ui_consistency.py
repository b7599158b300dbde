"""The pages never contradict themselves: workers' heartbeats, errors, form problems, log out."""

from __future__ import annotations

import re

import httpx
import pytest

from cairn.store import open_store
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord

from .flows import start, status
from .test_server import TOKEN
from .test_ui_pages import csrf_of

pytestmark = pytest.mark.process


@pytest.fixture
async def web(server):
    """A browser-like client on the pages: it keeps cookies and follows no redirect."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


def cells(html: str, run_id: str) -> dict[str, str]:
    """The runs page's cells of one run's row, by column heading (tags stripped)."""
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)
    row = re.search(rf'<tr data-run-id="{re.escape(run_id)}".*?</tr>', html, re.S)
    assert head and row, html
    names = [re.sub(r"<[^>]+>", "", th).strip() for th in re.findall(r"<th.*?</th>", head[1], re.S)]
    texts = [re.sub(r"<[^>]+>", " ", td) for td in re.findall(r"<td.*?</td>", row[0], re.S)]
    return {name: " ".join(text.split()) for name, text in zip(names, texts, strict=True)}


async def test_workers_page__a_dead_worker_shows_its_last_heartbeat(web, store_url):
    store = open_store(store_url)
    await store.open()
    try:
        await store.write(
            worker_ops.register_worker(WorkerRecord("gone-1", "host-a", 4242, 0.0, 0.0, lease=10.0))
        )
        await store.write(worker_ops.expire_workers(["gone-1"]))  # a neighbour saw its process end
    finally:
        await store.close()

    page = await web.get("/workers")

    row = re.search(r'<tr data-worker-id="gone-1".*?</tr>', page.text, re.S)
    assert row, page.text
    text = " ".join(re.sub(r"<[^>]+>", " ", row[0]).split())
    assert "never" not in text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text.split("host-a")[1])
    assert "dead" in text


async def test_runs_page__an_error_is_never_shown_as_waiting_for(web, api, workers):
    await start(api, "t.broken", run_id="broken")
    await start(api, "t.waiter", run_id="cancelled")
    await status(api, "broken", "FAILED")
    await status(api, "cancelled", "WAITING")
    assert (await api.post("/runs/cancelled/cancel")).status_code == 200
    await status(api, "cancelled", "CANCELLED")

    page = await web.get("/")

    failed = cells(page.text, "broken")
    assert failed["Waiting for"] == ""
    assert "not fixed yet" in failed["Status"]  # the error, beside the status it explains
    assert cells(page.text, "cancelled")["Waiting for"] == ""


async def test_task_form__every_problem_is_named_in_the_banner_and_beside_its_field(
    web, api, workers
):
    await start(api, "t.address", run_id="ship")
    await status(api, "ship", "WAITING")
    [task] = (await api.get("/tasks", params={"run_id": "ship"})).json()["tasks"]
    page = await web.get(f"/tasks/{task['task_id']}")

    sent = await web.post(f"/tasks/{task['task_id']}", data={"csrf": csrf_of(page), "by": "ann"})

    assert sent.status_code == 422
    found = re.findall(r'class="field-error" id="e-([^"]+)" role="alert">([^<]*)<', sent.text)
    beside = dict(found)
    assert beside == {
        "name": "required",
        "address.street": "required",
        "address.city": "required",
        "address.zip": "required",
    }
    banner = re.search(r'<div class="notice error" role="alert">(.*?)</div>', sent.text, re.S)
    assert banner, sent.text
    for label in ("Name", "Street", "City", "Zip"):
        assert label in banner[1]


async def test_login_page__offers_no_log_out_before_logging_in(server_factory):
    server = server_factory("--token", TOKEN)
    async with httpx.AsyncClient(base_url=server.url) as web:
        login = await web.get("/login")
        assert login.status_code == 200
        assert "Log out" not in login.text
        signed = await web.post(
            "/login", data={"csrf": csrf_of(login), "token": TOKEN, "next": "/"}
        )
        assert signed.status_code == 303
        assert "Log out" in (await web.get("/")).text
        # With the header alone there is no session to end.
    async with httpx.AsyncClient(base_url=server.url) as other:
        bearer = await other.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        assert "Log out" not in bearer.text
