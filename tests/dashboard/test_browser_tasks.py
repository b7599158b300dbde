"""A human task answered in the browser, as an operator does it: from the keyboard.

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
