"""The run page's compact timeline over HTTP: bars for attempts, waits and long runs."""

from __future__ import annotations

import re

import httpx
import pytest

from .flows import start, status

pytestmark = pytest.mark.process


@pytest.fixture
async def web(server):
    """A client on the pages."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


def overview(page: httpx.Response) -> str:
    found = re.search(r'<section id="overview" data-live-section>(.*?)</section>', page.text, re.S)
    assert found, page.text
    return found[1]


async def test_run_page__a_bar_for_each_attempt_and_the_wait(web, api, workers):
    await start(api, "t.wobbly", "x", run_id="wob")
    await start(api, "t.waiter", run_id="waits")
    await status(api, "wob", "COMPLETED")
    await status(api, "waits", "WAITING")

    chart = overview(await web.get("/runs/wob"))
    rows = re.findall(r'<text class="label"[^>]*><title>([^<]+)</title>', chart)
    assert rows == ["add#1", "wobble#1"]
    kinds = re.findall(r'<rect class="bar (\w+)"', chart)
    assert sorted(kinds) == ["backoff", "failed", "ok", "ok"]
    failed = re.search(r'<rect class="bar failed"[^>]*><title>([^<]+)</title>', chart)
    assert failed and "wobble#1: attempt 1 failed: builtins.ConnectionError: wobble 1" in failed[1]
    assert '<line class="now"' not in chart  # finished: no "now" edge

    waiting = overview(await web.get("/runs/waits"))
    assert re.findall(r'<rect class="bar (\w+)"', waiting) == ["ok", "open"]
    assert '<line class="now"' in waiting
    assert " style=" not in waiting  # positions are SVG attributes (the CSP allows no style)


async def test_run_page__a_long_run_packs_its_bars_into_a_lane(web, api, workers):
    await start(api, "t.long", 250, run_id="long")
    await status(api, "long", "COMPLETED")

    chart = overview(await web.get("/runs/long"))

    assert "250 entries, packed into 1 lane" in chart
    # Touching bars of one kind are drawn as one, named by the entries at their ends (how
    # many touch depends on the time between steps: see tests/unit/test_bars.py).
    titles = re.findall(r'<rect class="bar ok"[^>]*><title>([^<]+)</title>', chart)
    merged = [t for t in titles if re.match(r"add#\d+ … add#\d+: \d+ steps that succeeded$", t)]
    counts = [int(t.rsplit(": ", 1)[1].split()[0]) for t in merged]
    assert sum(counts) + len(titles) - len(merged) == 250  # every step, drawn once
    assert '<text class="label"' not in chart


async def test_run_page__a_history_longer_than_its_window_is_not_read_whole(web, api, workers):
    await start(api, "t.long", 2050, run_id="longer")
    await status(api, "longer", "COMPLETED")

    page = (await web.get("/runs/longer")).text

    assert 'data-history-skipped="50"' in page
    assert "reads the last 2,000 of 2,050 history entries; the first 50 are not shown" in page
    assert '<option value="51">' in page and '<option value="50">' not in page  # fork choices
    assert "2000 entries, packed into" in overview(await web.get("/runs/longer"))
