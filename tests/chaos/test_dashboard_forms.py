"""A form sent while the database does not answer comes back with what was typed in it.

The dashboard is served in this process (uvicorn), so that its deadline can be short, on
PostgreSQL behind a FreezingProxy; Chromium fills the forms as an operator does. Before,
each of these posts answered a bare 503 page and what was typed in the form was lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.chaos.proxy import FreezingProxy
from tests.dashboard.flows import Flows, until
from tests.dashboard.test_browser import CHROMIUM, browser_problem

import cairn
from cairn.dashboard import app, target

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

DEADLINE = 1.0  # seconds, for the test (the dashboard's own is target.DEADLINE)


async def _serve(engine: cairn.Engine) -> tuple[Any, asyncio.Task[None], str]:
    import uvicorn

    config = uvicorn.Config(app(engine), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await until("the dashboard to listen", lambda: _started(server))
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, task, f"http://127.0.0.1:{port}"


async def _result(engine: cairn.Engine, run_id: str) -> Any:
    return await (await engine.get(run_id)).result(timeout=20)


async def _started(server: Any) -> bool:
    return bool(server.started)


@pytest.fixture
async def tab() -> AsyncIterator[Any]:
    problem = browser_problem()
    if problem is not None:
        pytest.skip(problem)
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            context = await chromium.new_context()
            page = await context.new_page()
            page.on("dialog", lambda dialog: dialog.accept())
            yield page
        finally:
            await chromium.close()


async def test_frozen_database__each_form_comes_back_with_what_was_typed(
    pg_url: str, freezing: FreezingProxy, monkeypatch: pytest.MonkeyPatch, tab: Any
) -> None:
    from playwright.async_api import expect

    monkeypatch.setattr(target, "DEADLINE", DEADLINE)
    flows = Flows(pg_url)
    served = Flows(freezing.url(pg_url.rsplit("/", 1)[1]))
    async with (
        flows.engine() as workers,
        cairn.Engine(served.url, registry=flows.registry, workers=0) as engine,
    ):
        await workers.start("t.waiter", run_id="frozen")
        await workers.start("t.inbox", run_id="asks")
        task = (await until("the task", lambda: workers.tasks.list(run_id="asks")))[0]
        await engine.queues.update("mail", concurrency=1, per_worker=1)
        server, serving, url = await _serve(engine)
        try:
            alert = tab.locator("[data-field=unanswered]")

            async def frozen_then_again(button: Any) -> None:
                """Send with the database frozen; see the form back; thaw; send it again."""
                freezing.freeze(new=True)
                try:
                    await button.click()
                    await expect(alert).to_contain_text("the database did not answer")
                    await expect(alert).to_contain_text("try again")
                finally:
                    freezing.thaw()
                    freezing.restore()

            # An event, with a name and a payload typed in.
            await tab.goto(f"{url}/runs/frozen")
            form = tab.locator("form[action$='/event']")
            await form.locator("[name=name]").fill("go")
            await form.locator("[name=payload]").fill('{"typed": "by hand"}')
            await frozen_then_again(form.locator("button[type=submit]"))
            # Under the labels the form had (it said "Payload", "Idempotency key").
            await expect(tab.locator("label", has_text="Payload (JSON)")).to_have_count(1)
            await expect(tab.get_by_label("Idempotency key (optional)")).to_have_value("")
            assert await tab.locator("[name=name]").input_value() == "go"
            assert await tab.locator("[name=payload]").input_value() == '{"typed": "by hand"}'
            await tab.locator("button", has_text="Try again").click()
            await expect(tab.locator("[role=status]")).to_contain_text("event 'go' sent")
            assert await _result(workers, "frozen") == {"typed": "by hand"}

            # A queue's limits.
            await tab.goto(f"{url}/queues")
            row = tab.locator("tr[data-queue=mail]")
            await row.locator("input[name=concurrency]").fill("7")
            await frozen_then_again(row.locator("button", has_text="Save"))
            assert await tab.locator("[name=concurrency]").input_value() == "7"
            assert await tab.locator("[name=per_worker]").input_value() == "1"
            await tab.locator("button", has_text="Try again").click()
            await expect(tab.locator("[role=status]")).to_contain_text("queue mail")
            limits = {q.name: q for q in await workers.queues.list()}["mail"]
            assert (limits.concurrency, limits.per_worker) == (7, 1)

            # A task's answer.
            await tab.goto(f"{url}/tasks/{task.task_id}")
            await tab.locator("input[name='v.approved']").check()
            await tab.fill("#f-by", "ann")
            await frozen_then_again(tab.locator("form button[type=submit]").last)
            assert await tab.locator("[name=by]").input_value() == "ann"
            # The checkbox is one, still checked (it came back as a text box saying
            # "true"), and the fields have the labels the task's page gave them.
            await expect(tab.get_by_label("Approved")).to_be_checked()
            await expect(tab.get_by_label("Answered by")).to_have_value("ann")
            await tab.locator("button", has_text="Try again").click()
            await expect(tab.locator("[role=status]")).to_contain_text("answered by ann")
            assert await _result(workers, "asks") == {"approved": True}

            # A cancel, confirmed in the browser's dialog.
            await workers.start("t.waiter", run_id="stopped")
            await tab.goto(f"{url}/runs/stopped")
            await frozen_then_again(tab.locator("form[action$='/cancel'] button"))
            await tab.locator("button", has_text="Try again").click()
            await expect(tab.locator("[role=status]")).to_contain_text("cancel")
            with pytest.raises(cairn.RunCancelled):
                await _result(workers, "stopped")
        finally:
            server.should_exit = True
            await serving
