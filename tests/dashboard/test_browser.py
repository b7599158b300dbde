"""The web pages in a real browser: Playwright driving Debian's Chromium against `cairn dashboard`.

Locally these skip (with the reason) when /usr/bin/chromium or Playwright is missing;
with CI=true they fail instead. They run on SQLite only: the pages call the same
RunControl on both stores, and the API and page tests already cover PostgreSQL.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.conftest import IN_CI

from .attacker import attacker_site, fetch_page, form_page, visit
from .flows import start, status, until

pytestmark = pytest.mark.process

CHROMIUM = "/usr/bin/chromium"
EXPECT_TIMEOUT = 15_000  # milliseconds for a page to show what a test waits for


def browser_problem() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture
def store_url(sqlite_url: str) -> str:
    """SQLite only (see the module docstring)."""
    return sqlite_url


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Chromium, headless."""
    problem = browser_problem()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"CI=true but the browser tests cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=EXPECT_TIMEOUT)
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
async def page(browser, server) -> AsyncIterator[Any]:
    """A tab on the dashboard that accepts every confirmation dialog."""
    context = await browser.new_context(base_url=server.url)
    tab = await context.new_page()
    tab.on("dialog", lambda dialog: dialog.accept())
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))

    def console(message: Any) -> None:
        # A form sent back with its field errors is a 422 on purpose.
        if message.type == "error" and "status of 422" not in message.text:
            errors.append(message.text)

    tab.on("console", console)
    yield tab
    await context.close()
    assert errors == []  # no script error, and no CSP violation


async def test_browser__runs_list_filter_and_a_runs_timeline(page, api, workers):
    from playwright.async_api import expect

    for n in range(2):
        await start(api, "t.total", n, 10, run_id=f"sum-{n}")
    await start(api, "t.waiter", run_id="waits")
    await status(api, "sum-0", "COMPLETED")
    await status(api, "sum-1", "COMPLETED")
    await status(api, "waits", "WAITING")

    await page.goto("/")
    rows = page.locator("tr[data-run-id]")
    await expect(rows).to_have_count(3)
    await page.select_option("select[name=status]", "COMPLETED")
    await page.fill("input[name=where]", "order=1")
    await page.click("form.filters button[type=submit]")
    await expect(rows).to_have_count(1)
    assert "status=COMPLETED" in page.url
    await expect(rows.first).to_have_attribute("data-run-id", "sum-1")

    await page.click("text=sum-1")
    await expect(page.locator("h1")).to_contain_text("sum-1")
    entries = page.locator("ol.timeline > li")
    await expect(entries).to_have_count(2)
    await expect(entries.nth(0)).to_contain_text("add#1")
    await expect(entries.nth(1)).to_contain_text("add#2")
    await expect(entries.nth(1)).to_contain_text("12")  # the second step's output
    await expect(page.locator("#facts")).to_contain_text('"total": 11')


async def test_browser__cancel_a_run_from_its_page(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.waiter", run_id="to-cancel")
    await status(api, "to-cancel", "WAITING")
    await page.goto("/runs/to-cancel")
    await expect(page.locator("#facts")).to_contain_text("event 'go'")
    await page.click("button[data-action=cancel]")  # the dialog is accepted
    await expect(page.locator("[role=status]")).to_contain_text("cancel: run to-cancel")
    await expect(page.locator("h1 [data-field=status]")).to_have_text("CANCELLED")
    await status(api, "to-cancel", "CANCELLED")
    await expect(page.locator("button[data-action=cancel]")).to_have_count(0)


async def test_browser__answer_a_task_wrong_first_then_right(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.review", 42, run_id="review")
    await status(api, "review", "WAITING")
    await page.goto("/tasks")
    await page.click("text=Approve order 42")
    await page.fill("[name='v.amount']", "0")
    await page.select_option("[name='v.reason']", label="stock")
    await page.fill("[name=by]", "ann")
    await page.click("form.task-form button[type=submit]")
    await expect(page.locator("#e-amount")).to_have_text("0 is less than the minimum of 1")
    await expect(page.locator("[name='v.amount']")).to_have_value("0")

    await page.fill("[name='v.amount']", "250")
    await page.check("[name='v.approved']")
    await page.fill("[name='v.address.city']", "Ghent")
    await page.click("form.task-form button[type=submit]")
    await expect(page.locator("[role=status]")).to_contain_text("answered by ann")
    await expect(page.locator("table.answered")).to_contain_text("Approve order 42")
    done = await status(api, "review", "COMPLETED")
    assert done["result"] == {
        "approved": True,
        "amount": 250,
        "reason": "stock",
        "address": {"city": "Ghent"},
    }


async def test_browser__a_hook_resumed_through_the_api_finishes_live(page, api, workers, flows):
    from playwright.async_api import expect

    await start(api, "t.hooked", run_id="hooked")
    await until("a hook token", lambda: _has(flows.tokens))
    await status(api, "hooked", "WAITING")
    await page.goto("/runs/hooked")
    await expect(page.locator("h1 [data-field=status]")).to_have_text("WAITING")
    await page.evaluate("window.stayed = true")  # gone if the page reloads

    response = await api.post(f"/hooks/{flows.tokens[0]}", json={"paid": 42})
    assert response.status_code == 202
    await expect(page.locator("h1 [data-field=status]")).to_have_text("COMPLETED")
    await expect(page.locator("#facts")).to_contain_text('"paid": 42')  # the result, live
    await expect(page.locator("ol.timeline > li")).to_have_count(2)
    assert await page.evaluate("window.stayed") is True

    await page.goto("/")
    row = page.locator("tr[data-run-id=hooked]")
    await expect(row.locator("[data-field=status]")).to_have_text("COMPLETED")


async def test_browser__the_run_page_shows_a_stream_as_it_grows(page, api, workers, flows):
    from playwright.async_api import expect

    await start(api, "t.speaker", 2, run_id="speaker")
    await until("its first tokens", lambda: _streamed(workers, "speaker", 2))
    await page.goto("/runs/speaker")
    text = page.locator("[data-stream=tokens] [data-stream-text]")
    await expect(text).to_have_text("tok0tok1")
    flows.release.set()  # the step writes its last chunk and closes the stream
    await expect(text).to_have_text('tok0tok1{"done":true}\n')
    await expect(page.locator("[data-stream=tokens][data-ended]")).to_have_count(1)


async def _streamed(engine, run_id: str, count: int) -> bool:
    from cairn.store.programs import streams

    return [("tokens", count, count)] == await engine.store.read(streams.stream_names(run_id))


async def test_browser__the_runs_list_follows_a_run_live(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.waiter", run_id="slow")
    await status(api, "slow", "WAITING")
    await page.goto("/")
    row = page.locator("tr[data-run-id=slow]")
    await expect(row.locator("[data-field=waiting]")).to_contain_text("event 'go'")
    await page.evaluate("window.stayed = true")
    sent = await api.post("/runs/slow/events/go", json={"payload": 1})
    assert sent.status_code == 202
    await expect(row.locator("[data-field=status]")).to_have_text("COMPLETED")
    await expect(row.locator("[data-field=waiting]")).to_have_text("")
    assert await page.evaluate("window.stayed") is True
    # The live update keeps the start a machine-readable time, as the page rendered it.
    started = row.locator("[data-field=started] time")
    await expect(started).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT.*\+00:00$"))


# A value another site picks for the CSRF cookie it plants, and sends in its forms.
PLANTED = "planted-csrf-value-known-to-the-attacker"


async def statuses(api) -> dict[str, str]:
    runs = (await api.get("/runs")).json()["runs"]
    return {run["run_id"]: run["status"] for run in runs}


async def test_attack__text_plain_fetches_cancel_and_start_nothing(browser, server, api, workers):
    await start(api, "t.waiter", run_id="victim")
    await status(api, "victim", "WAITING")
    calls = [
        ("/api/v1/runs/cancel", {"filter": {"status": "WAITING"}}, True),
        ("/api/v1/runs/victim/cancel", None, False),  # no body, no Content-Type at all
        ("/api/v1/runs", {"workflow": "t.total", "args": [1, 2], "run_id": "planted"}, True),
        ("/api/v1/runs", {"workflow": "t.total", "args": [1, 2], "run_id": "planted2"}, False),
    ]
    with attacker_site({"/": (fetch_page(server.url, calls), {})}) as site:
        await visit(browser, site.url + "/", until_url=site.url + "/#done")
    assert await statuses(api) == {"victim": "WAITING"}


async def test_attack__a_form_with_a_planted_csrf_cookie_changes_nothing(
    browser, server, api, workers
):
    # The double-submit cookie alone does not hold here: the attacker's server sets
    # `cairn_csrf` for 127.0.0.1, and the browser sends it to the dashboard's port too.
    for run_id in ("victim-1", "victim-2"):
        await start(api, "t.waiter", run_id=run_id)
        await status(api, run_id, "WAITING")
    plant = {"Set-Cookie": f"cairn_csrf={PLANTED}; Path=/; SameSite=Lax"}
    pages = {
        "/one": (
            form_page(
                f"{server.url}/runs/victim-1/cancel", {"csrf": [PLANTED], "confirmed": ["yes"]}
            ),
            plant,
        ),
        "/bulk": (
            form_page(
                f"{server.url}/runs/bulk",
                {
                    "csrf": [PLANTED],
                    "confirmed": ["yes"],
                    "action": ["cancel"],
                    "run": ["victim-2"],
                },
            ),
            plant,
        ),
    }
    with attacker_site(pages) as site:
        for path in pages:
            await visit(browser, site.url + path, until_url=server.url)
    assert await statuses(api) == {"victim-1": "WAITING", "victim-2": "WAITING"}


async def test_attack__a_plain_cross_site_form_changes_nothing(browser, server, api, workers):
    await start(api, "t.waiter", run_id="victim")
    await status(api, "victim", "WAITING")
    page_html = form_page(f"{server.url}/runs/victim/cancel", {"confirmed": ["yes"]})
    with attacker_site({"/": (page_html, {})}) as site:
        await visit(browser, site.url + "/", until_url=server.url)
    assert await statuses(api) == {"victim": "WAITING"}


async def test_own_buttons__retry_a_failed_run(page, api, workers, flows):
    from playwright.async_api import expect

    await start(api, "t.broken", run_id="broken")
    await status(api, "broken", "FAILED")
    flows.fixed = True
    await page.goto("/runs/broken")
    await page.click("button[data-action=retry]")  # the dialog is accepted
    await expect(page.locator("[role=status]")).to_contain_text("retry: run broken")
    await status(api, "broken", "COMPLETED")


async def test_own_buttons__send_an_event_from_the_form(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.waiter", run_id="waits")
    await status(api, "waits", "WAITING")
    await page.goto("/runs/waits")
    form = page.locator("#send-event form")
    await form.locator("[name=name]").fill("go")
    await form.locator("[name=payload]").fill('{"ok": true}')
    await form.locator("button[type=submit]").click()
    await expect(page.locator("[role=status]")).to_contain_text("event 'go' sent")
    done = await status(api, "waits", "COMPLETED")
    assert done["result"] == {"ok": True}


async def _has(items: list[str]) -> bool:
    return bool(items)


STATUSES = re.compile(r"\b(PENDING|RUNNING|SLEEPING|WAITING|PAUSED|COMPLETED|FAILED|CANCELLED)\b")
# Every run status a run's page shows at one moment: its badges and its notice.
SHOWN_STATUSES = """() => {
  const texts = [...document.querySelectorAll('[data-field=status], [role=status]')];
  return texts.map((el) => el.textContent).join(' | ');
}"""


async def _one_status_at_a_time(page: Any, until_status: str) -> list[str]:
    """What the page showed, sampled until it shows `until_status`; each sample one status."""
    samples: list[str] = []
    for _ in range(600):
        shown = await page.evaluate(SHOWN_STATUSES)
        samples.append(shown)
        assert len(set(STATUSES.findall(shown))) == 1, samples
        if until_status in shown:
            return samples
        await page.wait_for_timeout(25)  # sampling what the page shows, not synchronising
    raise AssertionError(f"the page never showed {until_status}: {samples[-5:]}")


async def test_browser__after_a_retry_the_page_shows_one_status(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.shaky", run_id="shaky")
    await status(api, "shaky", "FAILED")
    await page.goto("/runs/shaky")
    await expect(page.locator("h1 [data-field=status]")).to_have_text("FAILED")

    await page.click("button[data-action=retry]")  # the dialog is accepted
    await expect(page.locator("[role=status]")).to_contain_text("retry: run shaky")
    # It runs, sleeps before its step's second attempt, runs and fails again: the badges,
    # the facts and the notice never disagree on the way.
    samples = await _one_status_at_a_time(page, "FAILED")
    await status(api, "shaky", "FAILED")
    assert len(samples) > 1


async def test_browser__cancel_a_sleeping_run_the_notice_agrees_with_the_badge(page, api, workers):
    from playwright.async_api import expect

    await start(api, "t.sleeper", run_id="nap")
    await status(api, "nap", "SLEEPING")
    await page.goto("/runs/nap")
    await page.click("button[data-action=cancel]")
    await expect(page.locator("[role=status]")).to_contain_text("cancel: run nap")
    await _one_status_at_a_time(page, "CANCELLED")
    await status(api, "nap", "CANCELLED")


async def test_browser__every_page_fits_a_window_800_pixels_wide(page, api, workers):
    # The page itself never scrolls sideways: a table too wide scrolls within its box,
    # so the header, the filters and the notices stay in view.
    await start(api, "t.waiter", run_id="narrow")
    await start(api, "t.broken", run_id="failed")  # an error under its status, a traceback
    await status(api, "narrow", "WAITING")
    await status(api, "failed", "FAILED")
    await page.set_viewport_size({"width": 800, "height": 700})
    wide = {}
    pages = ("/", "/runs/narrow", "/runs/failed", "/tasks", "/schedules", "/queues", "/workers")
    for path in pages:
        await page.goto(path)
        width = await page.evaluate("document.documentElement.scrollWidth")
        if width > 800:
            wide[path] = width
    assert wide == {}
