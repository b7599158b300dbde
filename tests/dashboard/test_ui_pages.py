"""The web pages over HTTP against a real `cairn dashboard`: escaping, CSP, CSRF, login, events."""

from __future__ import annotations

import json
import re
from datetime import datetime
from urllib.parse import quote

import httpx
import pytest

from .flows import EVIL, EVIL_WORKFLOW, start, status
from .test_server import TOKEN

pytestmark = pytest.mark.process

ID = "r-<img src=x onerror=alert(1)>"
PAGES = ("/", "/tasks", "/schedules", "/queues", "/workers")


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def notice_of(page: httpx.Response) -> str:
    found = re.search(r'role="status">([^<]*)<', page.text)
    return found.group(1) if found else ""


@pytest.fixture
async def web(server):
    """A browser-like client on the pages: it keeps cookies and follows no redirect."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


async def test_pages__each_renders_with_the_security_headers(web, api, workers):
    run_id = await start(api, "t.total", 1, 2)
    await status(api, run_id, "COMPLETED")
    for path in (*PAGES, f"/runs/{run_id}", "/static/cairn.css", "/static/cairn.js"):
        response = await web.get(path)
        assert response.status_code == 200, (path, response.text)
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "script-src 'self';" in csp  # no 'unsafe-inline'
        assert response.headers["x-frame-options"] == "DENY"
    page = await web.get(f"/runs/{run_id}")
    assert "<script>" not in page.text  # scripts only from files: <script src=...>
    assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/static/cairn.js" defer>']
    assert " style=" not in page.text  # no inline styles either
    assert (await api.get("/runs")).headers["content-security-policy"]
    missing = await web.get("/runs/ghost")
    assert missing.status_code == 404
    assert "run &#39;ghost&#39; not found" in missing.text


async def test_escaping__values_from_a_run_show_as_text(web, api, workers):
    run_id = await start(api, EVIL_WORKFLOW, run_id=ID)
    await status(api, run_id, "WAITING")
    page = await web.get("/runs/" + quote(run_id, safe=""))
    posted = await web.post(
        "/runs/" + quote(run_id, safe="") + "/event",
        data={"csrf": csrf_of(page), "name": "go", "payload": json.dumps(EVIL)},
    )
    assert posted.status_code == 303
    failed = await status(api, run_id, "FAILED")
    assert EVIL in failed["error"]["message"]
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    listing = await web.get("/")
    page = await web.get("/runs/" + quote(run_id, safe=""))
    for response in (listing, page):
        assert response.status_code == 200
        assert "<script>alert" not in response.text
        assert escaped in response.text
    assert f"t.evil{escaped}" in listing.text  # the workflow name
    assert "note=&#34;&lt;script&gt;alert" in listing.text  # a column, as JSON
    assert "r-&lt;img src=x onerror=alert(1)&gt;" in listing.text  # the run id
    assert page.text.count("<script") == 1  # cairn.js, nothing else
    assert "Traceback" in page.text and f"bad {escaped}" in page.text  # the error


async def test_csrf__a_post_without_the_pages_token_changes_nothing(web, api, workers):
    run_id = await start(api, "t.waiter", run_id="csrf-run")
    await status(api, run_id, "WAITING")
    page = await web.get(f"/runs/{run_id}")
    token = csrf_of(page)
    assert web.cookies["cairn_csrf"] == token
    cookie = page.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    for data in ({}, {"csrf": "forged-value-of-enough-length"}, {"csrf": token[:-1]}):
        refused = await web.post(f"/runs/{run_id}/cancel", data={**data, "confirmed": "yes"})
        assert refused.status_code == 403, refused.text
        assert "reload the page" in refused.text
    async with httpx.AsyncClient(base_url=web.base_url) as other_site:  # no cookie to match
        forged = await other_site.post(
            f"/runs/{run_id}/cancel", data={"csrf": token, "confirmed": "yes"}
        )
        assert forged.status_code == 403
    assert (await api.get(f"/runs/{run_id}")).json()["control"] is None

    unconfirmed = await web.post(f"/runs/{run_id}/cancel", data={"csrf": token})
    assert unconfirmed.status_code == 200
    assert "Yes, cancel" in unconfirmed.text  # the confirmation page, for browsers without JS
    assert (await api.get(f"/runs/{run_id}")).json()["control"] is None
    done = await web.post(f"/runs/{run_id}/cancel", data={"csrf": token, "confirmed": "yes"})
    assert done.status_code == 303
    await status(api, run_id, "CANCELLED")
    again = await web.post(f"/runs/{run_id}/pause", data={"csrf": token, "confirmed": "yes"})
    shown = await web.get(again.headers["location"])
    assert "already finished" in notice_of(shown)


async def test_event_form__a_deeply_nested_payload_is_named_on_the_page(web, api, workers):
    run_id = await start(api, "t.waiter", run_id="deep")
    await status(api, run_id, "WAITING")
    page = await web.get(f"/runs/{run_id}")
    for depth in (1000, 100_000):
        posted = await web.post(
            f"/runs/{run_id}/event",
            data={"csrf": csrf_of(page), "name": "go", "payload": "[" * depth + "]" * depth},
        )
        assert posted.status_code == 303, posted.text[-500:]
        shown = await web.get(posted.headers["location"])
        assert "the payload is not valid JSON: nested more than 100 deep" in notice_of(shown)
    assert (await api.get(f"/runs/{run_id}")).json()["status"] == "WAITING"


async def test_login__the_token_once_then_a_session_cookie(server_factory, workers):
    server = server_factory("--token", TOKEN)
    async with httpx.AsyncClient(base_url=server.url) as web:
        first = await web.get("/tasks?assignee=ann")
        assert first.status_code == 303
        assert first.headers["location"] == "/login?next=%2Ftasks%3Fassignee%3Dann"
        for path in ("/", "/runs/x", "/ui/events?run=x"):
            assert (await web.get(path)).status_code == 303
        assert (await web.post("/runs/x/cancel")).status_code == 401
        assert (await web.get("/static/cairn.css")).status_code == 200

        login = await web.get(first.headers["location"])
        assert login.status_code == 200
        assert 'type="password"' in login.text
        wrong = await web.post(
            "/login", data={"csrf": csrf_of(login), "token": "guess", "next": "/tasks"}
        )
        assert wrong.status_code == 401
        assert "cairn_session" not in web.cookies
        right = await web.post(
            "/login", data={"csrf": csrf_of(login), "token": TOKEN, "next": "/tasks?assignee=ann"}
        )
        assert right.status_code == 303
        assert right.headers["location"] == "/tasks?assignee=ann"
        cookie = right.headers["set-cookie"]
        assert cookie.startswith("cairn_session=")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert TOKEN not in cookie  # a keyed hash of the token, not the token
        inbox = await web.get("/tasks?assignee=ann")
        assert inbox.status_code == 200
        assert "Log out" in inbox.text
        # The cookie opens the pages, not the JSON API.
        assert (await web.get("/api/v1/runs")).status_code == 401

        evil_next = await web.post(
            "/login", data={"csrf": csrf_of(inbox), "token": TOKEN, "next": "//evil.example/"}
        )
        assert evil_next.headers["location"] == "/"

        out = await web.post("/logout", data={"csrf": csrf_of(inbox)})
        assert out.status_code == 303
        assert "cairn_session" not in web.cookies
        assert (await web.get("/")).status_code == 303

    async with httpx.AsyncClient(base_url=server.url) as forged:
        forged.cookies.set("cairn_session", TOKEN)
        assert (await forged.get("/")).status_code == 303
    bearer = httpx.get(f"{server.url}/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200


async def test_runs_page__filters_paging_and_bulk_cancel(web, api, workers):
    for n in range(3):
        await start(api, "t.total", n, 1, run_id=f"sum-{n}")
    for n in range(2):
        await start(api, "t.waiter", run_id=f"wait-{n}")
    for n in range(3):
        await status(api, f"sum-{n}", "COMPLETED")
    for n in range(2):
        await status(api, f"wait-{n}", "WAITING")

    everything = await web.get("/")
    assert all(f"sum-{n}" in everything.text for n in range(3))
    waiting = await web.get("/", params={"status": "waiting"})
    assert "wait-0" in waiting.text and "sum-0" not in waiting.text
    assert "event &#39;go&#39; until" in waiting.text  # what holds the run
    by_column = await web.get("/", params={"where": "order=1", "workflow": "t.total"})
    assert "sum-1" in by_column.text and "sum-0" not in by_column.text
    assert 'value="order=1"' in by_column.text  # the filter box keeps what was asked
    same = await web.get("/?col.order=1")
    assert re.findall(r'data-run-id="([^"]+)"', same.text) == ["sum-1"]
    bad = await web.get("/", params={"where": "order"})
    assert "is not NAME=VALUE" in bad.text

    pages, path = [], "/?workflow=t.total"
    web_page = await web.get(path)
    pages.append(re.findall(r'data-run-id="([^"]+)"', web_page.text))
    assert pages[0] == ["sum-2", "sum-1", "sum-0"]
    assert 'rel="next"' not in web_page.text

    token = csrf_of(everything)
    chosen = {"csrf": token, "action": "cancel", "run": ["wait-0", "wait-1", "sum-0"]}
    ask = await web.post("/runs/bulk", data={**chosen, "back": "/?status=WAITING"})
    assert ask.status_code == 200 and "Cancel 3 selected run(s)?" in ask.text
    done = await web.post(
        "/runs/bulk", data={**chosen, "back": "/?status=WAITING", "confirmed": "yes"}
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/?status=WAITING"
    shown = await web.get(done.headers["location"])
    assert "cancel: 2 of 3 run(s) done" in notice_of(shown)
    assert "sum-0" in notice_of(shown)  # why the finished one was refused
    for n in range(2):
        await status(api, f"wait-{n}", "CANCELLED")


async def test_runs_page__started_is_when_a_worker_began_not_when_queued(web, api, workers):
    await start(api, "t.total", 1, 2, run_id="ran")
    await start(api, "t.total", 1, 2, run_id="later", delay="1h")
    ran = await status(api, "ran", "COMPLETED")

    listing = await web.get("/")

    rows = dict(re.findall(r'<tr data-run-id="([^"]+)"(.*?)</tr>', listing.text, re.S))
    assert "not started" in rows["later"]
    started = datetime.fromisoformat(ran["started_at"])
    assert f'datetime="{started.isoformat()}"' in rows["ran"]
    assert "not started" not in rows["ran"]


async def test_run_page__each_step_shows_its_input_and_every_attempt(web, api, workers):
    await start(api, "t.wobbly", EVIL, run_id="wobbly")
    await status(api, "wobbly", "COMPLETED")

    page = await web.get("/runs/wobbly")

    assert page.status_code == 200
    assert "<script>alert" not in page.text
    first, second = page.text.split('<li class="entry-')[1:]
    assert re.search(r'<div class="input">.*?\[\s*1,\s*1\s*\]', first, re.S)  # add(1, 1)
    escaped = "&#34;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;"
    shown_input = re.search(r'<div class="input">(.*?)</div>', second, re.S)
    assert shown_input and escaped in shown_input.group(1)
    assert "&#34;times&#34;: 1" in shown_input.group(1)  # the named argument
    tries = re.findall(r'<li class="attempt-(\w+)">(.*?)</li>', second, re.S)
    lines = [(kind, re.sub(r"<[^>]+>", "", text).split("\n")[0].strip()) for kind, text in tries]
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    took = r"\d+(µs|ms)"
    assert [kind for kind, _ in lines] == ["failed", "ok"]
    assert re.fullmatch(rf"attempt 1 started {when}, took {took} failed: .*wobble 1", lines[0][1])
    assert re.fullmatch(rf"attempt 2 started {when}, took {took} succeeded", lines[1][1])
    assert "Traceback" in tries[0][1]


async def test_run_page__a_long_timeline_shows_its_last_entries_and_links_to_all(web, api, workers):
    from cairn.dashboard.ui.run import TIMELINE_SHOWN

    steps = TIMELINE_SHOWN + 5
    await start(api, "t.long", steps, run_id="long")
    await status(api, "long", "COMPLETED")

    page = await web.get("/runs/long")
    whole = await web.get("/runs/long", params={"timeline": "all"})

    shown = [int(seq) for seq in re.findall(r'<li class="entry-\w+" data-seq="(\d+)"', page.text)]
    assert shown == list(range(6, steps + 1))  # the last TIMELINE_SHOWN, where the run is now
    assert f"{steps} entries" in page.text
    assert 'href="/runs/long?timeline=all#timeline"' in page.text
    everything = re.findall(r'<li class="entry-\w+" data-seq="(\d+)"', whole.text)
    assert [int(seq) for seq in everything] == list(range(1, steps + 1))
    assert "timeline=all" not in whole.text.split('id="timeline"')[1].split("</h2>")[1][:300]
    # The fork form still offers every entry.
    assert re.search(r'<option value="1"[ >]', page.text)


async def test_runs_page__keyset_pages_of_fifty(web, api):
    for n in range(52):
        await start(api, "t.total", n, 0, run_id=f"p-{n:02d}", allow_unknown=True)
    first = await web.get("/")
    ids = re.findall(r'data-run-id="([^"]+)"', first.text)
    assert len(ids) == 50
    following = re.search(r'href="(/\?cursor=[^"]+)" rel="next"', first.text)
    assert following, first.text
    second = await web.get(following.group(1).replace("&amp;", "&"))
    rest = re.findall(r'data-run-id="([^"]+)"', second.text)
    assert len(rest) == 2
    assert set(ids) | set(rest) == {f"p-{n:02d}" for n in range(52)}
    assert 'rel="next"' not in second.text
    assert "First page" in second.text


async def test_task_form__errors_beside_fields_then_an_answer_with_who(web, api, workers):
    await start(api, "t.review", 7, run_id="rev")
    await status(api, "rev", "WAITING")
    tasks = (await api.get("/tasks", params={"run_id": "rev"})).json()["tasks"]
    task_id = tasks[0]["task_id"]
    inbox = await web.get("/tasks", params={"assignee": "ann"})
    assert "Approve order 7" in inbox.text
    page = await web.get(f"/tasks/{task_id}")
    assert 'type="checkbox"' in page.text and "<select" in page.text
    assert "<fieldset" in page.text and 'type="number"' in page.text
    token = csrf_of(page)

    wrong = await web.post(
        f"/tasks/{task_id}",
        data={"csrf": token, "v.amount": "0", "v.reason": '"stock"', "by": ""},
    )
    assert wrong.status_code == 422
    errors = dict(
        re.findall(r'class="field-error" id="e-([^"]+)" role="alert">([^<]*)<', wrong.text)
    )
    assert errors["amount"] == "0 is less than the minimum of 1"
    assert errors["by"] == "required: say who answers"
    assert 'value="0"' in wrong.text  # what was typed stays
    assert (await api.get(f"/tasks/{task_id}")).json()["status"] == "open"

    right = await web.post(
        f"/tasks/{task_id}",
        data={
            "csrf": token,
            "v.approved": "true",
            "v.amount": "12",
            "v.reason": '"price"',
            "v.address.city": "Ghent",
            "by": "ann",
        },
    )
    assert right.status_code == 303, right.text
    done = await status(api, "rev", "COMPLETED")
    assert done["result"] == {
        "approved": True,
        "amount": 12,
        "reason": "price",
        "address": {"city": "Ghent"},
    }
    audit = await web.get("/tasks")
    answered = audit.text.split("Answered and closed")[1]
    assert "Approve order 7" in answered and ">ann<" in answered
    shown = await web.get(f"/tasks/{task_id}")
    assert "Answered by" in shown.text and '<form method="post" action="/tasks/' not in shown.text


async def test_events_stream__changes_then_end(web, api, workers):
    await start(api, "t.waiter", run_id="live")
    await status(api, "live", "WAITING")
    seen: list[dict] = []
    async with web.stream("GET", "/ui/events", params={"run": "live", "detail": "1"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        kind = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: ") and kind == "run":
                seen.append(json.loads(line[len("data: ") :]))
                if len(seen) == 1:
                    assert seen[0]["status"] == "WAITING"
                    sent = await api.post("/runs/live/events/go", json={"payload": 1})
                    assert sent.status_code == 202
            elif line.startswith("data: ") and kind == "end":
                break
    assert seen[-1]["status"] == "COMPLETED"
    assert seen[-1]["version"] != seen[0]["version"]
    assert (await web.get("/ui/events")).status_code == 400


async def test_run_page__the_event_form_only_where_a_wait_takes_it(web, api, workers):
    await start(api, "t.waiter", run_id="ev-wait")
    await start(api, "t.sleeper", run_id="ev-sleep")
    await start(api, "t.inbox", run_id="ev-task")
    for run_id in ("ev-wait", "ev-sleep", "ev-task"):
        await status(api, run_id, "WAITING", "SLEEPING")

    page = await web.get("/runs/ev-wait")
    assert "<h2>Send an event</h2>" in page.text
    assert 'name="name" required value="go"' in page.text  # prefilled with what it awaits
    for run_id in ("ev-sleep", "ev-task"):  # nothing there takes an event now
        # (an empty #send-event stays, for the page's live refresh to fill)
        assert "<h2>Send an event</h2>" not in (await web.get(f"/runs/{run_id}")).text

    posted = await web.post(
        "/runs/ev-wait/event", data={"csrf": csrf_of(page), "name": "og", "payload": "1"}
    )
    shown = await web.get(posted.headers["location"])
    assert notice_of(shown) == (
        "run ev-wait is not waiting for event &#39;og&#39; (it waits for event &#39;go&#39;); "
        "the event is kept for a later wait"
    )
    assert (await api.get("/runs/ev-wait")).json()["status"] == "WAITING"
