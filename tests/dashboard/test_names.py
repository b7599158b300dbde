"""Every name the API takes follows the one name rule: a bad one is 422 InvalidName, never a 500.

On PostgreSQL a NUL reaching the database was a 500 with a traceback in the log; on SQLite
it was stored, with empty and over-long queue names. Lookups by an id no row can have
(a NUL in a task or schedule id) find nothing: 404.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from cairn.dashboard import create_app

from .flows import Flows

NUL = "a\x00b"
BAD_NAMES = [
    pytest.param("", id="empty"),
    pytest.param("q" * 300, id="300-chars"),
    pytest.param(NUL, id="nul"),
]


def client_on(asgi: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=asgi), base_url="http://localhost/api/v1"
    )


def refused(response: httpx.Response, *, naming: str) -> None:
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "InvalidName", response.text
    assert response.json()["message"].startswith(f"{naming} "), response.text


@pytest.mark.parametrize("field", ["queue", "dedup_key", "partition"])
@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_names__post_runs_refuses_a_bad_queue_dedup_key_or_partition(
    flows: Flows, field: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            answer = await api.post(
                "/runs", json={"workflow": "t.later", "allow_unknown": True, field: bad}
            )
        refused(answer, naming=field)
        assert (await engine.list_runs()).runs == []
    assert "Traceback" not in caplog.text and "failed" not in caplog.text


@pytest.mark.parametrize(
    "query",
    [
        pytest.param({"workflow": NUL}, id="workflow"),
        pytest.param({"version": NUL}, id="version"),
        pytest.param({"workflow": "w" * 300}, id="long-workflow"),
        pytest.param({"col.a\x00": "1"}, id="column-name"),
        pytest.param({"run_id_prefix": NUL}, id="run_id_prefix"),
    ],
)
async def test_names__get_runs_refuses_a_bad_name_filter(
    flows: Flows, query: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            for params in (query, {**query, "counts": "true"}):
                answer = await api.get("/runs", params=params)
                assert answer.status_code == 422, answer.text
                assert answer.json()["error"] == "InvalidName"
    assert caplog.text == ""


async def test_names__a_column_filter_value_is_data_a_nul_in_it_matches_nothing(
    flows: Flows, caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            for value in (NUL, '"a\\u0000b"', '"\\ud800"'):
                answer = await api.get("/runs", params={"col.note": value})
                assert answer.status_code == 200, answer.text
                assert answer.json()["runs"] == []
            cursor = await api.get("/runs", params={"cursor": "1.5|a\x00b"})
            assert cursor.status_code == 400, cursor.text
            assert "invalid cursor" in cursor.json()["message"]
    assert caplog.text == ""


async def test_names__task_filters_and_ids(flows: Flows, caplog: pytest.LogCaptureFixture) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            refused(await api.get("/tasks", params={"assignee": NUL}), naming="assignee")
            refused(await api.get("/tasks", params={"run_id": NUL}), naming="run_id")
            refused(await api.get("/tasks", params={"assignee": ""}), naming="assignee")
            missing = await api.get("/tasks/a%00b")
            assert missing.status_code == 404, missing.text
            submitted = await api.post("/tasks/a%00b/submit", json={"values": {}})
            assert submitted.status_code == 404, submitted.text
            schedule = await api.get("/schedules/a%00b")
            assert schedule.status_code == 404, schedule.text
            paused = await api.post("/schedules/a%00b/pause")
            assert paused.status_code == 404, paused.text
    assert caplog.text == ""


@pytest.mark.parametrize("bad", ["q" * 300, "a%00b", "%20%20"])
async def test_names__post_queues_refuses_a_bad_queue_name(
    flows: Flows, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            refused(await api.post(f"/queues/{bad}", json={"concurrency": 1}), naming="queue name")
        assert await engine.queues.list() == []
    assert caplog.text == ""


async def test_names__bulk_actions_refuse_a_bad_filter_and_miss_a_bad_id(
    flows: Flows, caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            refused(
                await api.post("/runs/cancel", json={"filter": {"workflow": NUL}}),
                naming="filter.workflow",
            )
            by_id = await api.post("/runs/cancel", json={"ids": [NUL]})
            assert by_id.status_code == 200, by_id.text
            assert by_id.json()["results"][0]["error"] == "RunNotFound"
    assert caplog.text == ""


async def test_names__an_event_s_name_and_idempotency_key_follow_the_rule(
    flows: Flows, caplog: pytest.LogCaptureFixture
) -> None:
    async with flows.engine(workers=0) as engine, client_on(create_app(engine.control)) as api:
        run = await engine.start("t.later", allow_unknown=True)
        with caplog.at_level(logging.ERROR, logger="cairn.dashboard"):
            keyed = await api.post(f"/runs/{run.run_id}/events/go", json={"idempotency_key": NUL})
            refused(keyed, naming="idempotency_key")
            refused(await api.post(f"/runs/{run.run_id}/events/{'e' * 300}"), naming="event name")
    assert caplog.text == ""
