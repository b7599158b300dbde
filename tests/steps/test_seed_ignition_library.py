"""Coming from Ignition's exchange.workflows (seed 002): its step library, as listed.

Every call of the list (`tags.read/write/write_confirm`, `http.request`, `db.query/update`,
`wait.until_tag_equals`, `sleep.sleep_chunked`), with its keyword names, from a plain
`def` workflow declared with the compat decorators, and a step with every retry option
of the list. On both stores.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from cairn.clock import VirtualClock
from cairn.compat.ignition import getWorkflows, step, workflow
from cairn.steps import db, http, sleep, tags, wait
from engine.kit import WAIT, Kit
from engine.seeds import finish

from .conftest import Answer, HttpServer


class Plc:
    """A tag provider of one's own: a line that acknowledges its `command` and runs on start."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {
            "line/command": "stop",
            "line/ack": "",
            "line/running": False,
        }

    async def read(self, path: str) -> Any:
        return self.values[path]

    async def write(self, path: str, value: Any) -> None:
        self.values[path] = value
        if path == "line/command":
            self.values["line/ack"] = value
            self.values["line/running"] = value == "start"


async def test_ignition__every_library_call_from_a_plain_workflow(
    kit: Kit, sqlite_app: str, http_server: HttpServer
) -> None:
    url = http_server.script("/recipes", Answer(200, {"Content-Type": "application/json"}, b"7"))

    @workflow(name="line.startup")
    def startup(batch: str) -> dict[str, Any]:
        rt = getWorkflows()
        rt.progress("configuring")
        db.update("app", "CREATE TABLE batches (id TEXT, speed INTEGER)")
        response = http.request(
            "POST",
            url,
            headers={"X-Line": "1"},
            params={"batch": batch},
            json_body={"batch": batch},
            timeout_ms=5000,
        )
        speed = int(response.body)
        db.update(
            "app",
            "INSERT INTO batches (id, speed) VALUES (:id, :speed)",
            {"id": batch, "speed": speed},
        )
        tags.write("line/speed", speed)
        confirmed = tags.write_confirm(
            "line/command", "start", confirm_path="line/ack", timeout_ms=1000, poll_ms=20
        )
        running = wait.until_tag_equals("line/running", True, timeout_ms=1000, poll_ms=20)
        sleep.sleep_chunked(total_ms=40, chunk_ms=20)
        rows = db.query("app", "SELECT id, speed FROM batches WHERE id = :id", args={"id": batch})
        return {
            "speed": tags.read("line/speed"),
            "confirmed": confirmed,
            "running": running,
            "rows": rows,
        }

    kit.registry.add_workflow(startup)
    plc = Plc()
    async with kit.engine(tags=plc, databases={"app": sqlite_app}) as engine:
        run = await engine.start(startup, "b-1")
        assert await run.result(timeout=WAIT) == {
            "speed": 7,
            "confirmed": "start",
            "running": True,
            "rows": [{"id": "b-1", "speed": 7}],
        }
        names = [h.name for h in await engine.history(run.run_id)]
    [sent] = http_server.requests
    assert (sent.method, sent.path, sent.headers["X-Line"]) == ("POST", "/recipes?batch=b-1", "1")
    assert json.loads(sent.body) == {"batch": "b-1"}
    assert plc.values == {
        "line/command": "start",
        "line/ack": "start",
        "line/running": True,
        "line/speed": 7,
    }
    assert names[:5] == ["db.update", "http.POST", "db.update", "tags.write", "tags.write_confirm"]
    assert names[-2:] == ["db.query", "tags.read"]


async def test_ignition__a_step_with_every_retry_option_of_the_list(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @step(
        name="line.tare",
        options={
            "retries_allowed": True,
            "max_attempts": 3,
            "interval_seconds": 1.0,
            "backoff_rate": 2.0,
        },
    )
    def tare(scale: str) -> str:
        calls[scale] += 1
        if calls[scale] < 3:
            raise ConnectionError("scale busy")
        return scale

    @workflow(name="line.weigh")
    def weigh() -> str:
        return tare("s-1")

    kit.registry.add_workflow(weigh)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(weigh)
        assert await finish(engine, clock, run) == "s-1"
        attempts = await engine.control.attempts(run.run_id)
    waits = [(a["retry_at"] - a["failed_at"]).total_seconds() for a in attempts]
    assert waits == [pytest.approx(1.0, rel=0.11), pytest.approx(2.0, rel=0.11)]
    assert calls["s-1"] == 3
