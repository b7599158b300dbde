"""Forms filled in the browser as an operator does: a human task (from the keyboard), and
a queue's limits.

Chromium as in test_browser.py (SQLite only, for the same reason).
"""

from __future__ import annotations

import pytest

from . import test_browser
from .flows import start, status

pytestmark = pytest.mark.process

# The browser and its tab, on SQLite, as test_browser.py has them.
browser, page, store_url = test_browser.browser, test_browser.page, test_browser.store_url


async def test_browser_tasks__an_answer_without_who_names_that_problem_once(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.inbox", run_id="asks")
    await status(api, "asks", "WAITING")
    task_id = (await api.get("/tasks", params={"run_id": "asks"})).json()["tasks"][0]["task_id"]
    await page.goto(f"/tasks/{task_id}")
    await page.focus("input[name='v.approved']")
    await page.keyboard.press("Space")
    await page.keyboard.press("Enter")  # submits, with "Answered by" left empty

    alert = page.locator(".notice.error")
    await expect(alert).to_contain_text("1 problem to fix")
    # Before: listed twice, once as "by: required: ..." and once as "Answered by: ...".
    await expect(alert.locator("li")).to_have_text(["Answered by: required: say who answers"])
    await page.fill("#f-by", "ann")
    await page.keyboard.press("Enter")
    await expect(page.locator("[role=status]")).to_contain_text(f"task {task_id} answered by ann")
    await status(api, "asks", "COMPLETED")


async def test_browser_queues__saving_one_limit_keeps_the_others(page, api):
    # Two queues, so that each row's boxes and Save button must belong to the same form.
    for name in ("mail", "payments"):
        made = await api.post(
            f"/queues/{name}", json={"concurrency": 1, "per_worker": 1, "rate": "5/1m"}
        )
        assert made.status_code == 200, made.text
    await page.goto("/queues")
    row = page.locator("tr[data-queue=payments]")
    await row.locator("input[name=concurrency]").fill("3")
    await row.locator("button", has_text="Save").click()
    await page.wait_for_load_state()
    queues = {q["name"]: q for q in (await api.get("/queues")).json()["queues"]}
    # Before: only the first box was in the row's form; the others were sent as blank.
    assert queues["payments"] == {
        "name": "payments",
        "concurrency": 3,
        "per_worker": 1,
        "rate": "5/60s",
        "partition_concurrency": None,
    }
    assert queues["mail"]["concurrency"] == 1

    await row.locator("input[name=rate]").fill("lots")
    await row.locator("button", has_text="Save").click()
    await page.wait_for_load_state()
    notice = await page.locator("[role=status]").inner_text()
    assert "rate" in notice and "lots" in notice and "\n" not in notice.strip()
    queues = {q["name"]: q for q in (await api.get("/queues")).json()["queues"]}
    assert queues["payments"]["rate"] == "5/60s"
