"""POST /runs refuses unknown workflows and misfit arguments; every run id is reachable."""

from __future__ import annotations

import asyncio
import json
import textwrap
from datetime import date
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

import cairn

from .flows import start, status
from .server import run_cli
from .test_ui_pages import csrf_of

pytestmark = pytest.mark.process

# Ids a user may pick, each with a character a URL treats specially; the last ones end
# like an action's path, so only their encoded `/` tells them apart.
ODD_IDS = [
    "a/b",
    "q?x=1&y",
    "h#1",
    "50%",
    "100%25",
    "sp ace",
    "ünï/cødé ✓",
    "x/history",
    "y/cancel",
    "z/events/go",
]

TYPED = """
    from dataclasses import dataclass
    from datetime import date
    from decimal import Decimal

    import cairn


    @dataclass
    class Line:
        sku: str
        amount: Decimal


    @cairn.workflow("typed.invoice")
    async def invoice(order_id: str, amount: Decimal, due: date, lines: list[Line] = []) -> None:
        await cairn.wait_for_event("never")
"""


def segment(run_id: str) -> str:
    return quote(run_id, safe="")


async def test_start__an_unknown_workflow_is_422_naming_the_closest_known(api, workers):
    refused = await api.post("/runs", json={"workflow": "t.totl", "args": [1, 2]})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "UnknownWorkflow"
    assert "did you mean 't.total'?" in refused.json()["message"]
    assert "allow_unknown" in refused.json()["message"]
    assert (await api.get("/runs")).json()["runs"] == []

    queued = await api.post(
        "/runs", json={"workflow": "t.later", "allow_unknown": True, "run_id": "later"}
    )
    assert queued.status_code == 201, queued.text
    assert queued.json()["status"] == "PENDING"
    bad = await api.post("/runs", json={"workflow": "t.later", "allow_unknown": "yes"})
    assert bad.status_code == 400
    assert "allow_unknown must be true or false" in bad.json()["message"]


async def test_start__arguments_are_checked_and_converted_where_the_workflow_is_imported(
    server_factory, store_url: str, tmp_path: Path
):
    (tmp_path / "typed_flows.py").write_text(textwrap.dedent(TYPED), encoding="utf-8")
    server = server_factory("-m", "typed_flows")
    body = {"workflow": "typed.invoice", "run_id": "inv-1"}
    async with httpx.AsyncClient(base_url=server.api, timeout=10) as api:
        for args, kwargs, fragment in [
            (["o-1"], {}, "missing a required argument: 'amount'"),
            (["o-1", "1", "2024-05-01"], {"rush": "2030-01-01"}, "argument 'rush'"),
            (["o-1", "12,50", "2024-05-01"], {}, "argument 'amount': expected Decimal"),
            (["o-1", 1, "someday"], {}, "argument 'due': expected date, got 'someday'"),
            (["o-1", 1, "2024-05-01", [{"sku": "a", "amount": "x"}]], {}, "'lines[0].amount'"),
        ]:
            refused = await api.post("/runs", json={**body, "args": args, "kwargs": kwargs})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"] == "InvalidArguments"
            assert fragment in refused.json()["message"]
        assert (await api.get("/runs")).json()["runs"] == []

        lines = [{"sku": "a", "amount": 1.5}]
        started = await api.post(
            "/runs", json={**body, "args": ["o-1", 59.90, "2024-05-01"], "kwargs": {"lines": lines}}
        )
        assert started.status_code == 201, started.text

    def stored() -> tuple[cairn.History, str]:
        with cairn.Client(store_url) as client:
            run = client._call(client.control.record("inv-1"))
            return client.history("inv-1"), run.args

    history, text = await asyncio.to_thread(stored)
    assert history.args == ("o-1", Decimal("59.9"), date(2024, 5, 1))
    # A Line, stored as the dataclass it was converted to (a dict here, where it is not
    # importable).
    assert history.kwargs == {"lines": [{"sku": "a", "amount": Decimal("1.5")}]}
    assert '"type":"typed_flows:Line"' in text


async def test_child_run__reachable_by_its_id_through_the_api_the_pages_and_the_cli(
    api, server, workers, store_url: str, tmp_path: Path
):
    await start(api, "t.family", run_id="fam")
    child_id = "fam/t.kid#1"
    await status(api, "fam", "WAITING")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as web:
        for path in (segment(child_id), "fam/t.kid%231"):  # `/` encoded, or not
            found = await api.get(f"/runs/{path}")
            assert found.status_code == 200, (path, found.text)
            assert (found.json()["run_id"], found.json()["parent_id"]) == (child_id, "fam")
            history = await api.get(f"/runs/{path}/history")
            assert history.status_code == 200 and history.json()["run_id"] == child_id
        await status(api, segment(child_id), "WAITING")

        page = await web.get(f"/runs/{segment(child_id)}")
        assert page.status_code == 200
        assert f'href="/runs/{segment("fam")}"' in page.text  # its parent
        parent_page = await web.get("/runs/fam")
        assert f'href="/runs/{segment(child_id)}"' in parent_page.text  # the parent's child link

        shown = run_cli(tmp_path, "runs", "show", child_id, "--json", "--db", store_url)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["run"]["run_id"] == child_id

        posted = await web.post(
            f"/runs/{segment(child_id)}/event",
            data={"csrf": csrf_of(page), "name": "go", "payload": '"from the page"'},
        )
        assert posted.status_code == 303
    finished = await status(api, "fam", "COMPLETED")
    assert finished["result"] == "from the page"
    restarted = await api.post(f"/runs/{segment(child_id)}/restart")
    assert restarted.status_code == 201, restarted.text
    assert restarted.json()["source"] == child_id


async def test_user_ids__with_url_characters_work_on_every_route(api, workers):
    for run_id in ODD_IDS:
        assert await start(api, "t.waiter", run_id=run_id) == run_id
    for run_id in ODD_IDS:
        path = segment(run_id)
        run = await status(api, path, "WAITING")
        assert run["run_id"] == run_id
        history = await api.get(f"/runs/{path}/history")
        assert history.status_code == 200, (run_id, history.text)
        assert history.json()["run_id"] == run_id
        sent = await api.post(f"/runs/{path}/events/go", json={"payload": run_id})
        assert sent.status_code == 202, (run_id, sent.text)
        assert sent.json()["run_id"] == run_id
    for run_id in ODD_IDS:
        done = await status(api, segment(run_id), "COMPLETED")
        assert done["result"] == run_id
    cancelled = await api.post(f"/runs/{segment('y/cancel')}/cancel")
    assert cancelled.status_code == 409  # it completed: the id was not taken as a verb
    assert "'y/cancel'" in cancelled.json()["message"]
    missing = await api.get(f"/runs/{segment('a/c')}")
    assert missing.status_code == 404
    assert missing.json()["message"] == "run 'a/c' not found"


async def test_user_ids__odd_ids_on_the_pages_and_the_cli(
    api, server, workers, store_url: str, tmp_path: Path
):
    for run_id in ODD_IDS[:7]:
        await start(api, "t.waiter", run_id=run_id)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as web:
        listing = await web.get("/")
        for run_id in ODD_IDS[:7]:
            await status(api, segment(run_id), "WAITING")
            assert f'href="/runs/{segment(run_id)}"' in listing.text
            page = await web.get(f"/runs/{segment(run_id)}")
            assert page.status_code == 200, (run_id, page.text)
    for run_id in ODD_IDS[:7]:
        shown = run_cli(tmp_path, "runs", "show", run_id, "--json", "--db", store_url)
        assert shown.returncode == 0, (run_id, shown.stderr)
        assert json.loads(shown.stdout)["run"]["run_id"] == run_id
    sent = run_cli(tmp_path, "send", "sp ace", "go", '"by cli"', "--db", store_url)
    assert sent.returncode == 0, sent.stderr
    assert (await status(api, segment("sp ace"), "COMPLETED"))["result"] == "by cli"
