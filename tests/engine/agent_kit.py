"""A scripted support conversation for the pydantic-ai tests: no network, no key.

The FunctionModel answers by turn: look the order up, then refund it, then reply. It
counts its calls, so a test sees which turns a replay asked the model for again.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolReturnPart)
    ]


class Script:
    """The model's side of the conversation, one tool call per turn, then the answer."""

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = calls
        self.asked: Counter[int] = Counter()  # turn -> how many times the model was asked

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = len(tool_returns(messages))
        self.asked[turn] += 1
        if turn < len(self.calls):
            name, args = self.calls[turn]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{turn}")])
        said = "; ".join(str(part.content) for part in tool_returns(messages))
        return ModelResponse(parts=[TextPart(f"done: {said}")])

    def model(self) -> FunctionModel:
        return FunctionModel(self)


def support_agent(script: Script, name: str | None = "support") -> Agent[None, str]:
    return Agent(script.model(), name=name)
