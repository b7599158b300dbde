"""Each tool through the SDK's own client, connected in-process, on both stores.

The server is `cairn mcp`'s (mcp_server/server.py) on an engine without workers; the
`workers` engine executes the runs, as `cairn worker` would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

import cairn
from cairn.mcp_server import server, tools
from cairn.runtime.verbs import VERBS

from .conftest import answer, approve_through, refusal, until


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    """A client session with `cairn mcp`'s server on an engine that executes nothing.

    Not a fixture: the SDK's task groups must be left in the task that entered them.
    """
    async with cairn.Engine(url, workers=0) as engine:
        async with Client(server.build(engine.control)) as session:
            yield session


async def status(client: Client, run_id: str) -> str:
    return str(answer(await client.call_tool("show_run", {"run_id": run_id}))["status"])


async def start(client: Client, workflow: str, *args: object) -> str:
    started = await client.call_tool("start_run", {"workflow": workflow, "args": list(args)})
    return str(answer(started)["run_id"])


async def reaches(client: Client, run_id: str, wanted: str) -> None:
    async def check() -> bool:
        return await status(client, run_id) == wanted

    await until(check, f"run {run_id} to be {wanted}")


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
        run_id = await start(client, "mcp.sleepy")
        await reaches(client, run_id, "SLEEPING")
        cancelled = answer(await client.call_tool("cancel", {"run_id": run_id}))
        assert cancelled["action"] == "cancel"
        await reaches(client, run_id, "CANCELLED")


async def test_retry__a_failed_run_continues_from_its_failed_step(
    store_url: str, workers: cairn.Engine, tmp_path: Path
):
    async with connected(store_url) as client:
        marker = tmp_path / "fixed"
        run_id = await start(client, "mcp.fragile", str(marker))
        await reaches(client, run_id, "FAILED")
        marker.touch()
        retried = answer(await client.call_tool("retry", {"run_id": run_id}))
        assert (retried["execution"], retried["by"]) == (2, "mcp")
        await reaches(client, run_id, "COMPLETED")


async def test_send_event__the_waiting_run_takes_it(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        run_id = await start(client, "mcp.event")
        await reaches(client, run_id, "WAITING")
        sent = answer(
            await client.call_tool("send_event", {"run_id": run_id, "name": "go", "payload": 42})
        )
        assert sent["awaited"] is True
        await reaches(client, run_id, "COMPLETED")
        assert answer(await client.call_tool("show_run", {"run_id": run_id}))["result"] == 42


async def test_resume_hook__the_run_goes_on_with_the_payload(store_url: str, workers: cairn.Engine):
    async with connected(store_url) as client:
        run_id = await start(client, "mcp.hook")
        await reaches(client, run_id, "WAITING")
        token = answer(await client.call_tool("show_run", {"run_id": run_id}))["columns"]["token"]
        resumed = answer(
            await client.call_tool("resume_hook", {"token": token, "payload": {"ok": True}})
        )
        assert resumed == {"run_id": run_id, "resumed": True}
        await reaches(client, run_id, "COMPLETED")
        again = refusal(await client.call_tool("resume_hook", {"token": token}))
        assert "HookNotFound" in again


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
        run_id = await start(client, "mcp.event")
        await reaches(client, run_id, "WAITING")
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
