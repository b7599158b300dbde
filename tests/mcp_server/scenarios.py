"""What a client does with each verb: in-process (test_tools) and over HTTP (test_transports)."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from .conftest import answer, refusal, until


async def status(client: Client, run_id: str) -> str:
    return str(answer(await client.call_tool("show_run", {"run_id": run_id}))["status"])


async def start(client: Client, workflow: str, *args: object) -> str:
    started = await client.call_tool("start_run", {"workflow": workflow, "args": list(args)})
    return str(answer(started)["run_id"])


async def reaches(client: Client, run_id: str, wanted: str) -> None:
    async def check() -> bool:
        return await status(client, run_id) == wanted

    await until(check, f"run {run_id} to be {wanted}")


async def cancel_a_sleeping_run(client: Client) -> None:
    run_id = await start(client, "mcp.sleepy")
    await reaches(client, run_id, "SLEEPING")
    cancelled = answer(await client.call_tool("cancel", {"run_id": run_id}))
    assert cancelled["action"] == "cancel"
    await reaches(client, run_id, "CANCELLED")


async def retry_a_failed_run(client: Client, tmp_path: Path) -> None:
    marker = tmp_path / "fixed"
    run_id = await start(client, "mcp.fragile", str(marker))
    await reaches(client, run_id, "FAILED")
    marker.touch()
    retried = answer(await client.call_tool("retry", {"run_id": run_id}))
    assert (retried["execution"], retried["by"]) == (2, "mcp")
    await reaches(client, run_id, "COMPLETED")


async def send_an_event(client: Client) -> None:
    run_id = await start(client, "mcp.event")
    await reaches(client, run_id, "WAITING")
    sent = answer(
        await client.call_tool("send_event", {"run_id": run_id, "name": "go", "payload": 42})
    )
    assert sent["awaited"] is True
    await reaches(client, run_id, "COMPLETED")
    assert answer(await client.call_tool("show_run", {"run_id": run_id}))["result"] == 42


async def resume_a_hook(client: Client) -> None:
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
