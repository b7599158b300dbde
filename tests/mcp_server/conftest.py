"""An engine that executes the test workflows, and an MCP client session on its database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

import cairn

from . import flows  # noqa: F401  (registers the workflows)

WAIT = 20.0  # seconds; runs finish in milliseconds


@pytest.fixture
async def workers(store_url: str) -> AsyncIterator[cairn.Engine]:
    """The process that executes runs, as `cairn worker` would."""
    async with cairn.Engine(store_url, workers=8, poll_interval=0.05) as engine:
        yield engine


def answer(result: CallToolResult) -> Any:
    """A tool's JSON answer; fails the test on a tool error."""
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    found = json.loads(text)
    assert result.structured_content == found  # every answer is an object
    return found


def refusal(result: CallToolResult) -> str:
    """A tool error's text; fails the test if the call succeeded."""
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error, text
    return str(text)


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = WAIT) -> Any:
    """The first truthy value of `check()`, polled; fails naming `what` after `timeout`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def approve_through(client: Client) -> None:
    """The session of the issue: list tools and runs, answer the task, see the run complete."""
    listed = await client.list_tools()
    names = {tool.name for tool in listed.tools}
    assert {"list_runs", "show_run", "list_tasks", "submit_task", "start_run"} <= names
    started = answer(await client.call_tool("start_run", {"workflow": "mcp.approve", "args": [7]}))
    run_id = started["run_id"]

    async def waiting() -> Any:
        runs = answer(await client.call_tool("list_runs", {"workflow": "mcp.approve"}))["runs"]
        found = [r for r in runs if r["run_id"] == run_id and r["status"] == "WAITING"]
        return found[0] if found else None

    run = await until(waiting, "the run to wait for its task")
    assert "approval" in (run["waiting_for"] or "")
    shown = answer(await client.call_tool("show_run", {"run_id": run_id}))
    assert shown["waiting"]["kind"] == "task"
    assert "approval" in shown["waiting_text"]
    tasks = answer(await client.call_tool("list_tasks", {"run_id": run_id}))["tasks"]
    assert [t["name"] for t in tasks] == ["approval"]
    submitted = answer(
        await client.call_tool(
            "submit_task", {"task_id": tasks[0]["task_id"], "values": {"approved": True}}
        )
    )
    assert submitted["status"] == "submitted"
    assert submitted["submitted_by"] == "mcp"

    async def completed() -> Any:
        shown = answer(await client.call_tool("show_run", {"run_id": run_id}))
        return shown if shown["status"] == "COMPLETED" else None

    done = await until(completed, "the run to complete")
    assert done["result"] == {"order": 7, "approved": True}
