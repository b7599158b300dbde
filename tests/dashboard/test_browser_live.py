"""A run's page kept open while the run changes elsewhere: what it offers follows the run.

Chromium as in test_browser.py (SQLite only, for the same reason).
"""

from __future__ import annotations

import pytest

from . import test_browser
from .flows import start, status

pytestmark = pytest.mark.process

# The browser and its tab, on SQLite, as test_browser.py has them.
browser, page, store_url = test_browser.browser, test_browser.page, test_browser.store_url


async def test_browser_live__a_run_cancelled_elsewhere_no_longer_offers_its_event_form(
    page, api, workers
):
    from playwright.async_api import expect

    await start(api, "t.waiter", run_id="waits")
    await status(api, "waits", "WAITING")
    await page.goto("/runs/waits")
    await expect(page.locator("#send-event form")).to_be_visible()

    response = await api.post("/runs/waits/cancel")
    assert response.status_code == 200, response.text
    await expect(page.locator("h1")).to_contain_text("CANCELLED")
    # A cancelled run takes no event: the form the page showed when it waited is gone.
    await expect(page.locator("#send-event form")).to_have_count(0)


async def test_browser_live__a_cancel_requested_elsewhere_is_said_and_not_offered_again(
    page, api, flows
):
    # No worker comes for the parked run: the cancel stays requested. The open page went
    # on offering Cancel and the event form as if nothing had been asked.
    from playwright.async_api import expect

    async with flows.engine():
        await start(api, "t.waiter", run_id="asked")
        await status(api, "asked", "WAITING")
    await page.goto("/runs/asked")
    await expect(page.locator("#send-event form")).to_be_visible()

    assert (await api.post("/runs/asked/cancel")).json()["requested"] == "cancel"
    said = page.locator("[data-field=control]")
    await expect(said).to_contain_text("cancel requested at ")
    await expect(said).to_contain_text("unless it finishes first")
    await expect(page.locator("button[data-action=cancel]")).to_have_count(0)
    await expect(page.locator("#send-event form")).to_have_count(0)
    await expect(page.locator("h1")).to_contain_text("WAITING")
