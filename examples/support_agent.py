"""A support agent as a cairn workflow: it looks the order up, asks a person, refunds.

The agent is pydantic-ai's; `CairnAgent` makes each of its model requests and tool calls
a step, so a ticket survives a crash at any point: a resumed run gets the model's earlier
answers back from its history instead of asking again, and a tool that completed is not
called again. The approval is a cairn human task, asked from a tool that runs in the
workflow (`@workflow_tool`); the refund is an ordinary step.

Every side effect is appended to the file named by SUPPORT_LOG (default
``cairn-support-effects.log`` in the temporary folder), standing in for the outside world.

Handle a ticket in this process (starting it, or resuming it if it already exists)::

    python -m examples.support_agent "Please refund order o-1001" --db sqlite:///support.db

and approve the refund from another terminal: ``cairn tasks list``, then ``cairn tasks
submit TASK_ID '{"approved": true}'`` (or in the dashboard's inbox). The model is the one
named by SUPPORT_MODEL (``openai:gpt-4o``, with its key in the environment); without it,
a scripted `FunctionModel` plays the model's part offline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from decimal import Decimal
from typing import Any

import pydantic
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

import cairn
from cairn.contrib.pydantic_ai import CairnAgent, workflow_tool

ORDERS = {
    "o-1001": {"order_id": "o-1001", "customer": "Ada", "total": "42.50", "status": "delivered"},
    "o-1002": {"order_id": "o-1002", "customer": "Alan", "total": "310.00", "status": "lost"},
}


def effect(kind: str, **detail: Any) -> None:
    """Append one line to the side-effect log: what the outside world would see."""
    default = os.path.join(tempfile.gettempdir(), "cairn-support-effects.log")
    line = {"kind": kind, "pid": os.getpid(), **detail}
    with open(os.environ.get("SUPPORT_LOG", default), "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


class Approval(pydantic.BaseModel):
    """What the person reviewing a refund submits."""

    approved: bool
    note: str = ""


def scripted_turn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model's part, offline: look the order up, ask for the refund, then reply."""
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    effect("model", turn=len(returns))
    prompt = " ".join(
        str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)
    )
    order_id = (re.findall(r"o-\d+", prompt) or ["o-0"])[0]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": order_id})])
    if len(returns) == 1:
        order = returns[0].content
        if not isinstance(order, dict):
            return ModelResponse(parts=[TextPart(f"I could not find order {order_id}.")])
        args = {"order_id": order_id, "amount": order["total"], "reason": "customer request"}
        return ModelResponse(parts=[ToolCallPart("request_refund", args)])
    return ModelResponse(parts=[TextPart(f"Your refund request: {returns[-1].content}")])


def model() -> Model | str:
    """The model named by SUPPORT_MODEL, or the scripted one."""
    return os.environ.get("SUPPORT_MODEL") or FunctionModel(scripted_turn)


agent = Agent(
    model(),
    name="support",
    instructions="You are a support agent. Look the order up before asking for a refund.",
)


@agent.tool_plain
def lookup_order(order_id: str) -> dict[str, str] | str:
    """Look an order up by its id (o-1001)."""
    effect("lookup", order_id=order_id)
    return ORDERS.get(order_id, f"no order {order_id}")


@agent.tool_plain
@workflow_tool
async def request_refund(order_id: str, amount: str, reason: str) -> str:
    """Ask a person to approve refunding `amount` for the order; refund it if they do."""
    decision = await cairn.human_task(
        "approve-refund",
        title=f"Refund {amount} for order {order_id}?",
        data={"order_id": order_id, "amount": amount, "reason": reason},
        form=Approval,
    )
    if not decision.approved:
        return f"a person declined it ({decision.note or 'no reason given'})"
    receipt = await refund(order_id, Decimal(amount))
    return f"refunded {amount} (receipt {receipt})"


@cairn.step("support.refund")
async def refund(order_id: str, amount: Decimal) -> str:
    """Pay the money back, once: the provider deduplicates on the step's idempotency key."""
    key = cairn.current_step().idempotency_key
    effect("refund", order_id=order_id, amount=str(amount), key=key)
    return f"rf-{key[:8]}"


support = CairnAgent(agent)


@cairn.workflow("support.ticket")
async def handle_ticket(message: str) -> str:
    """Answer one support ticket with the agent; returns its reply."""
    result = await support.run(message)
    return str(result.output)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("message")
    parser.add_argument("--db", default="sqlite:///support.db")
    parser.add_argument("--run-id", default="ticket-1")
    options = parser.parse_args()
    async with cairn.Engine(options.db) as engine:
        run = await engine.start(handle_ticket, options.message, run_id=options.run_id)
        print(f"ticket {run.run_id}: waiting for the agent (approve in `cairn tasks`)")
        print(await run.result())
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
