"""Parked runs as the pages show them: what holds them, in words (both stores)."""

from __future__ import annotations

import httpx
import pytest

from .flows import Flows, start, status, until

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


async def test_run_page__a_sleep_or_a_wait_says_its_state_and_shows_no_output(server, api, workers):
    # The sleep's end and the wait's state were shown as an "output", a JSON string
    # (`output "no deadline"`), as if the wait had returned that text.
    await start(api, "t.sleeper", run_id="nap")
    await start(api, "t.family", run_id="fam")
    await status(api, "nap", "SLEEPING")
    await status(api, "fam", "WAITING")
    for run_id, said in (("nap", "until "), ("fam", "")):
        page = (await api.get(f"{server.url}/runs/{run_id}")).text
        entry = page[page.index('data-seq="2"' if run_id == "nap" else 'data-seq="1"') :]
        entry = entry.split("</li>")[0]
        assert '<div class="outcome">' not in entry, entry
        assert f'<span class="muted">{said}' in entry, entry


async def test_runs_page__a_bulk_cancel_refused_for_a_continued_run_names_it(server, api, workers):
    from .test_ui_pages import csrf_of, notice_of

    await start(api, "t.relay", 0, run_id="r0")
    newest = (await status(api, "r0", "CONTINUED"))["continued_to"]
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as web:
        token = csrf_of(await web.get("/"))
        chosen = {"csrf": token, "action": "cancel", "run": ["r0"], "confirmed": "yes"}
        done = await web.post("/runs/bulk", data={**chosen, "back": "/"})
        shown = await web.get(done.headers["location"])
    # The refusal names the run it refuses: "continued as new: NEW (...)" does not.
    assert f"refused: r0: continued as new: {newest} (" in notice_of(shown)
    # The runs list says where the run went, in the same words (it said nothing).
    row = shown.text[shown.text.index('data-run-id="r0"') :].split("</tr>")[0]
    assert f'continued as new: <a href="/runs/{newest}">{newest}</a>' in row, row


def _actions_of(page: str) -> str:
    return page[page.index('id="actions"') :].split("</section>")[0]


async def test_run_page__a_cancel_requested_is_said_and_not_offered_again(
    server, api, flows: Flows
):
    # A parked run with no worker, a cancel requested: the page offered Cancel again and
    # the "Send an event" form as if nothing had happened.
    async with flows.engine():
        await start(api, "t.waiter", run_id="asked")
        await status(api, "asked", "WAITING")
    assert (await api.post("/runs/asked/cancel")).status_code == 200
    page = (await api.get(f"{server.url}/runs/asked")).text
    said = page[page.index('data-field="control"') :].split("</dd>")[0]
    assert "cancel requested at " in said, said
    assert (
        "; it ends CANCELLED at its current or next durable point, unless it finishes first" in said
    ), said
    # Nor Pause: pausing the parked run dropped the cancel request (store behaviour).
    assert 'data-action="cancel"' not in _actions_of(page)
    assert 'data-action="pause"' not in _actions_of(page)
    assert "Send an event" not in page


async def test_run_page__a_pause_requested_is_said_and_not_offered_again(
    server, api, workers, flows
):
    # A run held in a long step, a pause requested: Pause is not offered again, Resume
    # (which withdraws the request) and Cancel are.
    await start(api, "t.held", run_id="held")

    async def live() -> object:
        return workers.worker.executions.live.get("held")

    await until("the run executing", live)
    assert (await api.post("/runs/held/pause")).json()["requested"] == "pause"
    page = (await api.get(f"{server.url}/runs/held")).text
    said = page[page.index('data-field="control"') :].split("</dd>")[0]
    assert "pause requested at " in said and "; it pauses at its next durable point" in said
    actions = _actions_of(page)
    assert 'data-action="pause"' not in actions
    assert 'data-action="resume"' in actions and 'data-action="cancel"' in actions
    flows.release.set()
    await status(api, "held", "PAUSED", "COMPLETED")
