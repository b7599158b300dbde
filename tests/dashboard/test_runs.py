"""GET /runs, GET /runs/{id}, GET /runs/{id}/history and POST /runs against a real server."""

from __future__ import annotations

from datetime import datetime

import pytest

from .flows import start, status

JSON = {"Content-Type": "application/json"}

pytestmark = pytest.mark.process


async def test_start_and_read__a_run_started_over_http_runs_on_a_worker(api, workers):
    response = await api.post(
        "/runs",
        json={"workflow": "t.total", "args": [2, 3], "kwargs": {"label": "x"}, "run_id": "r-1"},
    )
    assert response.status_code == 201, response.text
    assert response.json()["run_id"] == "r-1"
    assert response.json()["status"] in ("PENDING", "RUNNING", "COMPLETED")

    run = await status(api, "r-1", "COMPLETED")
    assert run["result"] == {"label": "x", "total": 5, "plus_one": 6}
    assert run["args"] == [2, 3]
    assert run["kwargs"] == {"label": "x"}
    assert run["columns"] == {"order": 2, "label": "x"}
    assert run["workflow"] == "t.total"

    history = (await api.get("/runs/r-1/history")).json()
    assert history["run_id"] == "r-1"
    assert [
        (e["seq"], e["key"], e["status"], e["input"], e["result"]) for e in history["history"]
    ] == [
        (1, "add#1", "completed", {"args": [2, 3], "kwargs": {}}, 5),
        (2, "add#2", "completed", {"args": [5, 1], "kwargs": {}}, 6),
    ]
    assert history["attempts"] == []


async def test_history__every_attempt_has_its_start_and_duration(api, workers):
    await start(api, "t.wobbly", "hi", run_id="wobbly")
    await status(api, "wobbly", "COMPLETED")

    history = (await api.get("/runs/wobbly/history")).json()

    _, step = history["history"]
    assert (step["key"], step["attempts"], step["input"]) == (
        "wobble#1",
        2,
        {"args": ["hi"], "kwargs": {"times": 1}},
    )
    [failed] = history["attempts"]
    assert (failed["key"], failed["attempt"], failed["message"]) == ("wobble#1", 1, "wobble 1")
    began, ended = (datetime.fromisoformat(failed[k]) for k in ("started_at", "failed_at"))
    assert failed["duration"] == pytest.approx((ended - began).total_seconds(), abs=1e-6)
    # The entry's start and duration are those of the attempt that succeeded.
    assert datetime.fromisoformat(step["started_at"]) >= datetime.fromisoformat(failed["retry_at"])
    assert step["duration"] >= 0


async def test_list__started_at_is_null_until_a_worker_starts_the_run(api, workers):
    await start(api, "t.total", 1, 2, run_id="ran")
    await start(api, "t.total", 1, 2, run_id="later", delay="1h")
    ran = await status(api, "ran", "COMPLETED")

    listed = {r["run_id"]: r for r in (await api.get("/runs")).json()["runs"]}

    assert listed["later"]["started_at"] is None
    assert listed["ran"]["started_at"] == ran["started_at"]
    started = datetime.fromisoformat(listed["ran"]["started_at"])
    assert started >= datetime.fromisoformat(listed["ran"]["created_at"])


async def test_start__an_existing_run_id_answers_200_with_that_run(api, workers):
    first = await api.post("/runs", json={"workflow": "t.total", "args": [1, 1], "run_id": "same"})
    again = await api.post("/runs", json={"workflow": "t.total", "args": [9, 9], "run_id": "same"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["run_id"] == "same"
    run = await status(api, "same", "COMPLETED")
    assert run["args"] == [1, 1]


async def test_list__filters_by_status_workflow_and_column(api, workers):
    for a in (1, 2, 3):
        await start(api, "t.total", a, 10, run_id=f"t{a}")
    await start(api, "t.waiter", run_id="w1")
    for a in (1, 2, 3):
        await status(api, f"t{a}", "COMPLETED")
    await status(api, "w1", "WAITING")

    def ids(response):
        assert response.status_code == 200, response.text
        return sorted(r["run_id"] for r in response.json()["runs"])

    assert ids(await api.get("/runs")) == ["t1", "t2", "t3", "w1"]
    assert ids(await api.get("/runs", params={"status": "waiting"})) == ["w1"]
    assert ids(await api.get("/runs", params={"workflow": "t.total"})) == ["t1", "t2", "t3"]
    assert ids(await api.get("/runs", params={"col.order": "2"})) == ["t2"]
    assert ids(await api.get("/runs", params={"col.order": '"2"'})) == []
    assert ids(await api.get("/runs", params={"col.label": "sum", "col.order": "3"})) == ["t3"]
    assert ids(await api.get("/runs", params={"version": "nope"})) == []
    assert ids(await api.get("/runs", params={"since": "2999-01-01T00:00:00"})) == []
    waiting = (await api.get("/runs", params={"status": "WAITING"})).json()["runs"][0]
    assert waiting["waiting_for"].startswith("event 'go'")


async def test_list__cursor_pages_through_every_run_once(api, workers):
    for n in range(5):
        await start(api, "t.total", n, 0, run_id=f"p{n}")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/runs", params=params)).json()
        seen += [r["run_id"] for r in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(seen) == [f"p{n}" for n in range(5)]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"stauts": "FAILED"}, "unknown query parameter 'stauts'"),
        ({"status": "DONE"}, "unknown run status 'DONE'"),
        ({"limit": "0"}, "limit must be between 1 and 1000"),
        ({"limit": "many"}, "limit must be an integer"),
        ({"cursor": "garbage"}, "invalid cursor"),
        ({"since": "yesterday"}, "since must be epoch seconds or an ISO 8601 time"),
        ({"col.": "1"}, "col.NAME"),
    ],
)
async def test_list__bad_parameters_are_400(unchanging_api, params, fragment):
    response = await unchanging_api.get("/runs", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "BadRequest"
    assert fragment in response.json()["message"]


async def test_read__unknown_run_is_404(api):
    for path in ("/runs/nope", "/runs/nope/history"):
        response = await api.get(path)
        assert response.status_code == 404
        assert response.json() == {"error": "RunNotFound", "message": "run 'nope' not found"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "request body is not valid JSON"),
        (b"[1, 2]", "request body must be a JSON object, got array"),
        (b'{"args": [1]}', "request body needs field 'workflow'"),
        (b'{"workflow": 7}', "workflow must be a string, got number"),
        (b'{"workflow": "t.total", "args": {"a": 1}}', "args must be an array, got object"),
        (b'{"workflow": "t.total", "kwargs": [1]}', "kwargs must be an object, got array"),
        (b'{"workflow": "t.total", "wat": 1}', "unknown field 'wat'"),
        (b'{"workflow": "t.total", "priority": "high"}', "priority must be an integer"),
        (b'{"workflow": "t.total", "kwargs": {"queue": "q"}}', "kwargs key 'queue'"),
        (b'{"workflow": "t.total", "args": [NaN]}', "not valid JSON"),
        (b"[" * 1000 + b"]" * 1000, "nested more than 100 deep"),
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 100 deep"),
        (b'{"workflow": "t.total", "args": ' + b"[" * 1000 + b"]" * 1000 + b"}", "100 deep"),
        (b'{"workflow": "t.total", "args": [1e400]}', "number 1e400 is out of range"),
        (b'{"workflow": "t.total\xff"}', "not UTF-8"),
        (b'{"workflow": "t.total", "args": ["\\ud800"]}', "lone surrogate"),
    ],
    ids=lambda value: repr(value)[:40] if isinstance(value, bytes) else None,
)
async def test_start__unreadable_bodies_are_400_and_start_nothing(unchanging_api, body, fragment):
    api = unchanging_api
    response = await api.post("/runs", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "BadRequest"
    assert fragment in response.json()["message"]
    assert (await api.get("/runs")).json()["runs"] == []


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_start__input_nested_up_to_the_limit_is_taken(api):
    # The body is one level; `args` and the arrays in it make the other 99.
    body = {"workflow": "t.total", "allow_unknown": True}
    started = await api.post("/runs", json={**body, "args": nested(99)})
    assert started.status_code == 201, started.text
    deeper = await api.post("/runs", json={**body, "args": nested(100)})
    assert deeper.status_code == 400
    assert "nested more than 100 deep" in deeper.json()["message"]


async def test_list__a_deeply_nested_column_filter_is_plain_text(api):
    # Deeper than json's recursion limit, in a request under h11's 16 KiB for a request's
    # head: a longer one is refused, and when it arrives in pieces (a loaded machine) the
    # server closes with bytes unread and the client sees a reset, not the 400.
    listed = await api.get("/runs", params={"col.order": "[" * 5_000})
    assert listed.status_code == 200, listed.text
    assert listed.json()["runs"] == []


async def test_start__values_cairn_rejects_are_422(api):
    too_long = await api.post("/runs", json={"workflow": "t.total", "run_id": "x" * 300})
    assert too_long.status_code == 422
    assert too_long.json()["error"] == "InvalidName"
    bad_delay = await api.post(
        "/runs", json={"workflow": "t.total", "delay": "soon", "allow_unknown": True}
    )
    assert bad_delay.status_code == 422
    assert bad_delay.json()["error"] == "InvalidValue"
    assert "soon" in bad_delay.json()["message"]


async def test_start__dedup_key_held_by_an_active_run_is_409(api, workers):
    first = await api.post(
        "/runs", json={"workflow": "t.waiter", "queue": "q", "dedup_key": "k", "run_id": "d1"}
    )
    assert first.status_code == 201
    second = await api.post("/runs", json={"workflow": "t.waiter", "queue": "q", "dedup_key": "k"})
    assert second.status_code == 409
    assert second.json()["error"] == "DuplicateRun"
    assert "d1" in second.json()["message"]


async def test_unknown_route_and_method_answer_in_the_error_shape(api):
    missing = await api.get("/nothing/here")
    assert missing.status_code == 404
    assert missing.json()["error"] == "NotFound"
    wrong = await api.delete("/runs")
    assert wrong.status_code == 405
    assert wrong.json()["error"] == "MethodNotAllowed"


async def test_start__run_at_holds_a_run_back_until_then(api):
    when = "2031-05-01T09:30:00+02:00"
    body = {"workflow": "t.total", "args": [1, 2], "allow_unknown": True}
    held = await api.post("/runs", json={**body, "run_at": when})
    assert held.status_code == 201, held.text
    run = held.json()
    assert run["status"] == "PENDING"
    assert run["started_at"] is None
    naive = await api.post("/runs", json={**body, "run_at": "2031-05-01T09:30"})
    assert naive.status_code == 201, naive.text
    bad = await api.post("/runs", json={**body, "run_at": "next tuesday"})
    assert bad.status_code == 400
    assert "run_at must be an ISO 8601 date and time, got 'next tuesday'" in bad.json()["message"]


async def test_nul_in_a_name_or_id__is_refused_plainly_not_a_500(api):
    # PostgreSQL cannot store a NUL: without a check up front the store refused it (500).
    started = await api.post("/runs", json={"workflow": "t.nul\u0000", "allow_unknown": True})
    assert started.status_code == 422, started.text
    assert started.json()["error"] == "InvalidName"
    assert "contains a NUL character" in started.json()["message"]
    for path in ("/runs/a%00b", "/runs/a%00b/history"):
        missing = await api.get(path)
        assert missing.status_code == 404, missing.text
        assert missing.json()["error"] == "RunNotFound"
    sent = await api.post("/runs/a%00b/cancel")
    assert sent.status_code == 404, sent.text


async def test_history__pages_through_a_long_history(api, workers):
    await start(api, "t.total", 2, 3, run_id="paged")
    await status(api, "paged", "COMPLETED")

    first = (await api.get("/runs/paged/history", params={"limit": 1})).json()
    second = (await api.get("/runs/paged/history", params={"limit": 1, "after": 1})).json()
    whole = (await api.get("/runs/paged/history")).json()

    assert ([e["key"] for e in first["history"]], first["next_after"]) == (["add#1"], 1)
    assert ([e["key"] for e in second["history"]], second["next_after"]) == (["add#2"], None)
    assert ([e["key"] for e in whole["history"]], whole["next_after"]) == (["add#1", "add#2"], None)


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"limit": 0}, "limit must be between 1 and 1000, got 0"),
        ({"limit": 5000}, "limit must be between 1 and 1000, got 5000"),
        ({"after": "x"}, "after must be an integer, got 'x'"),
        ({"after": -1}, "after must be between 0 and"),
    ],
)
async def test_history__bad_page_parameters_are_400(unchanging_api, params, fragment):
    response = await unchanging_api.get("/runs/nobody/history", params=params)
    assert response.status_code == 400, response.text
    assert fragment in response.json()["message"]
