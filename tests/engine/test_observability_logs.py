"""Log records inside runs carry run_id, workflow, step and attempt, on both stores."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import pytest

import cairn
from cairn.observability import JsonFormatter, RunContextFilter

from .kit import WAIT, Kit

FIELDS = ("run_id", "workflow", "step", "attempt")


class Collect(logging.Handler):
    """Keeps the records it sees, with the run-context filter on it (as users add it)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RunContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def of(self, logger: str) -> list[tuple[object, ...]]:
        return [
            (r.getMessage(), *(getattr(r, f) for f in FIELDS))
            for r in self.records
            if r.name == logger
        ]


@pytest.fixture
def collect() -> Iterator[Collect]:
    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    user = logging.getLogger("app")
    level = user.level
    user.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        user.setLevel(level)


async def test_logs__user_records_in_steps_and_workflow_code_carry_the_run(
    kit: Kit, collect: Collect
) -> None:
    app = logging.getLogger("app")
    tries = {"n": 0}

    @kit.step("flaky", retries=cairn.Retry(max_attempts=3, delay=0, max_delay=0, jitter=0))
    async def flaky() -> str:
        tries["n"] += 1
        app.info("flaky try %d", tries["n"])
        if tries["n"] < 2:
            raise ValueError("not yet")
        return "ok"

    @kit.step("blocking")
    def blocking() -> str:  # a sync step: its own thread
        app.info("in a thread")
        return "done"

    @kit.workflow("logs.flow")
    async def flow() -> str:
        app.info("workflow code")
        await flaky()
        await flaky()
        return await blocking()

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "done"
    app.info("outside")

    rid = run.run_id
    assert collect.of("app") == [
        ("workflow code", rid, "logs.flow", None, 1),
        ("flaky try 1", rid, "logs.flow", "flaky#1", 1),
        ("flaky try 2", rid, "logs.flow", "flaky#1", 2),
        ("flaky try 3", rid, "logs.flow", "flaky#2", 1),
        ("in a thread", rid, "logs.flow", "blocking#1", 1),
        ("outside", None, None, None, None),
    ]


async def test_logs__sync_workflow_records_carry_the_run(kit: Kit, collect: Collect) -> None:
    app = logging.getLogger("app")

    @kit.step("inner")
    def inner() -> int:
        app.info("step")
        return 1

    @kit.workflow("logs.sync")
    def sync_flow() -> int:
        app.info("workflow")
        return inner()

    async with kit.engine() as engine:
        run = await engine.start(sync_flow)
        assert await run.result(timeout=WAIT) == 1

    assert collect.of("app") == [
        ("workflow", run.run_id, "logs.sync", None, 1),
        ("step", run.run_id, "logs.sync", "inner#1", 1),
    ]


async def test_logs__cairn_records_inside_a_run_carry_it_without_the_filter(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    # caplog's handler has no filter: the attributes come from cairn's own loggers.
    order = {"first": "a"}

    @kit.step("a")
    async def a() -> str:
        return "a"

    @kit.step("b")
    async def b() -> str:
        return "b"

    @kit.workflow("logs.drifting")
    async def drifting() -> str:
        await (a() if order["first"] == "a" else b())
        order["first"] = "b"  # the replay after the event takes another path
        await cairn.wait_for_event("go")
        return "unreachable"

    caplog.set_level(logging.INFO, logger="cairn")
    async with kit.engine() as engine:
        run = await engine.start(drifting)
        async with asyncio.timeout(WAIT):
            while (await engine.control.record(run.run_id)).status != "WAITING":
                await asyncio.sleep(0.005)
        await engine.send_event(run.run_id, "go")
        with pytest.raises(cairn.RunFailed):
            await run.result(timeout=WAIT)

    errors = [r for r in caplog.records if r.name == "cairn.executor"]
    assert errors, caplog.text
    assert {tuple(getattr(r, f) for f in FIELDS) for r in errors} == {
        (run.run_id, "logs.drifting", None, 1)
    }
    worker = [r for r in caplog.records if r.name == "cairn.worker"]
    assert worker and all(r.run_id == run.run_id for r in worker)  # type: ignore[attr-defined]


def test_logs__json_formatter_writes_one_object_with_the_run_context() -> None:
    record = logging.LogRecord("app", logging.WARNING, __file__, 1, "hello %s", ("you",), None)
    RunContextFilter().filter(record)
    record.run_id = "r-1"  # as inside a run

    line = JsonFormatter().format(record)

    assert "\n" not in line
    data = json.loads(line)
    assert data.pop("time").endswith("+00:00")
    assert data == {
        "level": "WARNING",
        "logger": "app",
        "message": "hello you",
        "run_id": "r-1",
        "workflow": None,
        "step": None,
        "attempt": None,
    }


def test_logs__json_formatter_includes_the_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())

    data = json.loads(JsonFormatter().format(record))

    assert data["message"] == "failed"
    assert "ValueError: boom" in data["exception"]
    assert data["run_id"] is None
