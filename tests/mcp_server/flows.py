"""The workflows `cairn mcp`'s tests steer: a task, an event, a hook, a failure, a sleep."""

from __future__ import annotations

import os
from typing import Any

import cairn

FORM = {
    "type": "object",
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
}


@cairn.workflow(name="mcp.approve")
async def approve(order: int) -> dict[str, Any]:
    values = await cairn.human_task("approval", title=f"Approve order {order}", form=FORM)
    return {"order": order, "approved": values["approved"]}


@cairn.workflow(name="mcp.event")
async def on_event() -> Any:
    return await cairn.wait_for_event("go", timeout="1h")


@cairn.workflow(name="mcp.hook")
async def hooked() -> Any:
    hook = await cairn.create_hook("callback", timeout="1h")
    cairn.set_columns(token=hook.token)  # where the test reads it
    return await hook


@cairn.step(retries=1)
async def needs(marker: str) -> str:
    if not os.path.exists(marker):
        raise ValueError(f"no {marker} yet")
    return "fixed"


@cairn.workflow(name="mcp.fragile")
async def fragile(marker: str) -> str:
    return await needs(marker)


@cairn.workflow(name="mcp.sleepy")
async def sleepy() -> str:
    await cairn.sleep("1h")
    return "woke"
