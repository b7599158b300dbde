"""A pydantic-ai toolset whose tool calls are cairn steps, unless a tool runs in the workflow.

Each call is the step `<agent>.tool.<tool name>`: its result is recorded, so a replay never
calls a tool with side effects again. A tool marked `workflow_tool` runs in workflow code
instead, where it may wait (`cairn.human_task`, `cairn.sleep`) and call steps itself: the
way pydantic-ai's Temporal integration runs a tool in the workflow, not in an activity.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset

import cairn
from cairn.contrib.pydantic_ai import placement
from cairn.contrib.pydantic_ai.model import DEFAULT_OPTIONS, StepOptions

MARK = "__cairn_workflow_tool__"
F = TypeVar("F", bound=Callable[..., Any])

# What a tool raises to steer the agent, carried across the step as data: raised inside
# the step it would count as a failed attempt and be retried.
SIGNAL = "__pydantic_ai_signal__"


def workflow_tool(fn: F) -> F:
    """Mark a tool function to run in workflow code, not as a step.

    Such a tool may call `cairn.human_task`, `cairn.sleep`, `cairn.wait_for_event` and
    steps; like any workflow code it must be deterministic. Put it above or below
    `@agent.tool` / `@agent.tool_plain`: either order works.
    """
    setattr(fn, MARK, True)
    return fn


@dataclass
class CairnToolset(WrapperToolset[AgentDepsT]):
    """Runs the wrapped toolset's calls as steps named `<prefix><tool name>`.

    `in_workflow` holds the names of the tools that run in workflow code.
    """

    prefix: str = ""
    options: StepOptions = DEFAULT_OPTIONS
    in_workflow: Collection[str] = ()

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        """Call the tool: as a step in workflow code, unless it is a workflow tool."""
        if name in self.in_workflow or not placement.in_workflow_code():
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        async def tool_call(shown: dict[str, Any]) -> Any:
            try:
                return await self.wrapped.call_tool(name, tool_args, ctx, tool)
            except ModelRetry as exc:
                return {SIGNAL: "retry", "message": exc.message}
            except CallDeferred as exc:
                return {SIGNAL: "deferred", "metadata": exc.metadata, "kind": exc.kind}
            except ApprovalRequired as exc:
                return {SIGNAL: "approval", "metadata": exc.metadata}
            except cairn.NotInRun as exc:  # a wait (human_task, sleep) called in the step
                raise cairn.NotInRun(
                    f"{exc.message}; to wait, tool {name!r} must run in the workflow: "
                    "mark it @workflow_tool (cairn.contrib.pydantic_ai)"
                ) from exc

        result = await cairn.run_step(
            self.prefix + name,
            tool_call,
            tool_args,
            retries=self.options.retries,
            timeout=self.options.timeout,
        )
        if isinstance(result, dict) and SIGNAL in result:
            raise signal(result)
        return result


def signal(recorded: dict[str, Any]) -> Exception:
    """The pydantic-ai exception a tool raised in its step, rebuilt from its record."""
    kind = recorded[SIGNAL]
    if kind == "retry":
        return ModelRetry(recorded["message"])
    if kind == "deferred":
        return CallDeferred(recorded["metadata"], kind=recorded["kind"])
    return ApprovalRequired(recorded["metadata"])


def marked_tools(toolsets: Collection[AbstractToolset[Any]]) -> set[str]:
    """The names of the function tools marked `workflow_tool` in these toolsets."""
    found: set[str] = set()

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            found.update(
                name for name, tool in toolset.tools.items() if hasattr(tool.function, MARK)
            )

    for toolset in toolsets:
        toolset.apply(visit)
    return found
