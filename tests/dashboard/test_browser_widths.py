"""Pages at the widths operators use (1280 and 1024 pixels) with names that do not break.

A workflow name, a run id or a waiting text with no space in it must still break inside
its cell: the page never scrolls sideways, and the runs table's last column, "Waiting
for", stays in view. Chromium as in test_browser.py (SQLite only, for the same reason).
"""

from __future__ import annotations

import pytest

from . import test_browser
from .flows import LONG_WORKFLOW, start, status

pytestmark = pytest.mark.process

# The browser and its tab, on SQLite, as test_browser.py has them.
browser, page, store_url = test_browser.browser, test_browser.page, test_browser.store_url

LONG_ID = "run-with-a-very-long-id-" + "abcdefghij" * 12

# Cells of a table whose content is wider than the cell (it spills over the next).
SPILLED = """() => Array.from(document.querySelectorAll('table td'))
  .filter(td => td.scrollWidth > td.clientWidth + 1)
  .map(td => td.className + ': ' + td.textContent.trim().slice(0, 40))"""


@pytest.mark.parametrize("width", [1280, 1024])
async def test_browser_widths__long_names_break_and_waiting_for_stays_in_view(
    page, api, workers, width
):
    await start(api, LONG_WORKFLOW, run_id=LONG_ID)
    await status(api, LONG_ID, "WAITING")
    await page.set_viewport_size({"width": width, "height": 800})

    await page.goto("/")
    header = await page.locator("table.runs th", has_text="Waiting for").bounding_box()
    assert header is not None
    assert header["x"] + header["width"] <= width, "'Waiting for' is off to the right"
    assert await page.evaluate(SPILLED) == []

    await page.goto(f"/runs/{LONG_ID}")
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    shown = await page.locator("h1 code").inner_text()
    assert shown.replace("\n", "") == LONG_ID  # broken across lines, never cut


@pytest.mark.parametrize("width", [1280, 1024])
async def test_browser_widths__a_worker_of_a_long_named_workflow_fits(page, api, workers, width):
    # The worker's workflows (the `workers` engine's, LONG_WORKFLOW among them) are chips.
    await page.set_viewport_size({"width": width, "height": 800})
    await page.goto("/workers")
    await page.locator("table.workers td", has_text=LONG_WORKFLOW).wait_for()
    assert await page.evaluate(SPILLED) == []
    box = "(d => d.scrollWidth - d.clientWidth)(document.querySelector('.wide'))"
    assert await page.evaluate(box) <= 0, "the workers table scrolls sideways"


DECLINED = (
    "builtins.ValueError: payment provider rejected the charge for order o-1001-abcdef-"
    "very-long-order-identifier-0001 because the card was declined by the issuing bank "
    "with code 51 insufficient funds"
)


@pytest.mark.parametrize("width", [1280, 1024])
async def test_browser_widths__a_long_step_error_is_shown_whole_once(page, api, workers, width):
    # Three failed attempts of one step: before, the page showed the long error five
    # times whole (the run's error, the step's, each attempt's), each over two lines.
    await start(api, "t.declined", "o-1001-abcdef-very-long-order-identifier-0001", run_id="no")
    await status(api, "no", "FAILED")
    await page.set_viewport_size({"width": width, "height": 800})
    await page.goto("/runs/no")
    text = " ".join((await page.locator("main").inner_text()).split())
    assert text.count(DECLINED) == 1, text
    assert f"step 'decline' failed after 3 attempt(s): {DECLINED}" in text  # the run's
    # Elsewhere a reference, linked to the whole error; an attempt's line stays one line.
    assert await page.locator("ol.timeline a[href='#run-error']").count() == 4
    attempts = page.locator("li.attempt-failed")
    assert await attempts.count() == 3
    for i in range(3):
        box = await attempts.nth(i).bounding_box()
        assert box is not None and box["height"] < 30, await attempts.nth(i).inner_text()
    assert await page.locator("details.fold summary", has_text="Traceback").count() == 1
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
