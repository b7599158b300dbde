"""Each tool through the SDK's own client, connected in-process, on both stores.

The server is `cairn mcp`'s (mcp_server/server.py) on an engine without workers; the
`workers` engine executes the runs, as `cairn worker` would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from tests.dashboard.test_deadlines import held

import cairn
from cairn.dashboard import target
from cairn.mcp_server import server, tools
from cairn.runtime.verbs import VERBS

from . import scenarios
from .conftest import answer, approve_through, refusal


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    """A client session with `cairn mcp`'s server on an engine that executes nothing.

    Not a fixture: the SDK's task groups must be left in the task that entered them.
    """
    async with cairn.Engine(url, workers=0) as engine:
        async with Client(server.build(engine.control)) as session:
            yield session


async def test_tools__one_per_verb_and_read(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(listed) == [tool.name for tool in tools.TOOLS]
        for verb in VERBS:
            assert listed[verb.name].description.startswith(verb.summary + ".")
            assert listed[verb.name].input_schema == verb.schema()


async def test_session__answers_a_task_and_sees_the_run_complete(
    store_url: str, workers: cairn.Engine
):
    async with connected(store_url) as client:
        await approve_through(client)


async def test_cancel__a_sleeping_run_ends_cancelled(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        await scenarios.cancel_a_sleeping_run(client)


async def test_retry__a_failed_run_continues_from_its_failed_step(
    store_url: str, workers: cairn.Engine, tmp_path: Path
):
    async with connected(store_url) as client:
        await scenarios.retry_a_failed_run(client, tmp_path)


async def test_send_event__the_waiting_run_takes_it(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        await scenarios.send_an_event(client)


async def test_resume_hook__the_run_goes_on_with_the_payload(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        await scenarios.resume_a_hook(client)


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("cancel", {}, "missing required argument 'run_id'"),
        ("cancel", {"run_id": 7}, "argument 'run_id'"),
        ("cancel", {"run_id": "r", "force": True}, "unknown argument 'force'"),
        ("fork", {"run_id": "r", "from_step": 0}, "argument 'from_step'"),
        ("submit_task", {"task_id": "t", "values": "yes"}, "argument 'values'"),
        ("list_runs", {"limit": 0}, "argument 'limit'"),
        ("start_run", {"workflow": ""}, "argument 'workflow'"),
    ],
)
async def test_bad_input__a_tool_error_naming_the_argument(
    store_url, workers, tool, arguments, named
):
    async with connected(store_url) as client:
        assert named in refusal(await client.call_tool(tool, arguments))


async def test_bad_input__changes_nothing(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        run_id = await scenarios.start(client, "mcp.event")
        await scenarios.reaches(client, run_id, "WAITING")
        wrong = refusal(await client.call_tool("send_event", {"run_id": run_id, "payload": 1}))
        assert "missing required argument 'name'" in wrong
        wrong = refusal(
            await client.call_tool("cancel", {"run_id": run_id, "reason": "no such argument"})
        )
        assert "unknown argument 'reason'" in wrong
        shown = answer(await client.call_tool("show_run", {"run_id": run_id}))
        assert (shown["status"], shown["control"]) == ("WAITING", None)


async def test_refusal__a_tool_error_naming_the_run(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        wrong = refusal(await client.call_tool("cancel", {"run_id": "no-such-run"}))
        assert "RunNotFound" in wrong and "no-such-run" in wrong
        wrong = refusal(await client.call_tool("no_such_tool", {}))
        assert "unknown tool 'no_such_tool'" in wrong


async def test_fork__an_entry_the_run_does_not_have_starts_nothing(
    store_url: str, workers: cairn.Engine
):
    async with connected(store_url) as client:
        run_id = await scenarios.start(client, "mcp.event")
        await scenarios.reaches(client, run_id, "WAITING")
        wrong = refusal(await client.call_tool("fork", {"run_id": run_id, "from_step": 99}))
        assert f"run {run_id!r} has no history entry 99" in wrong
        runs = answer(await client.call_tool("list_runs", {}))["runs"]
        assert [run["run_id"] for run in runs] == [run_id]
        forked = answer(await client.call_tool("fork", {"run_id": run_id, "from_step": 1}))
        assert (forked["source"], forked["from_step"], forked["by"]) == (run_id, 1, "mcp")


async def test_deadline__a_call_the_database_cannot_answer_is_a_tool_error_in_time(
    store_url: str, workers: cairn.Engine, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(target, "DEADLINE", 1.0)
    async with connected(store_url) as client:
        run_id = await scenarios.start(client, "mcp.event")
        await scenarios.reaches(client, run_id, "WAITING")
        with held(store_url, run_id):
            started = time.monotonic()
            # Without a deadline it waits for the holder: bounded here so the test ends.
            result = await asyncio.wait_for(client.call_tool("cancel", {"run_id": run_id}), 11)
            took = time.monotonic() - started
        wrong = refusal(result)
        assert wrong.startswith("cancel: StoreUnavailable: the database did not answer within 1s")
        assert took < 3, f"answered in {took:.1f}s"
        answer(await client.call_tool("cancel", {"run_id": run_id}))  # it answers again
