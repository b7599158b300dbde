"""The pydantic-ai capability that puts cairn steps around a run's model and toolset.

pydantic-ai asks each capability for a wrapper of the model that serves each request and
of the run's assembled toolset: the public seam its own durability integrations build on.
Using it, the model and the tools are the ones pydantic-ai chose for the run (`model=`,
`agent.override(...)`, run-time toolsets) and cairn only decides where each call runs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset

from cairn.contrib.pydantic_ai.model import DEFAULT_OPTIONS, CairnModel, StepOptions
from cairn.contrib.pydantic_ai.toolset import CairnToolset, marked_tools


@dataclass
class DurableSteps(AbstractCapability[AgentDepsT]):
    """Requests as steps `<agent_name>.model_request`, tool calls as `<agent_name>.tool.<tool>`.

    `workflow_tools` name the tools that run in workflow code instead (with those marked
    `@workflow_tool`).
    """

    agent_name: str
    model_options: StepOptions = DEFAULT_OPTIONS
    tool_options: StepOptions = DEFAULT_OPTIONS
    workflow_tools: Collection[str] = ()
    stream: str | None = None

    def get_wrapper_model(self, model: Model) -> Model | None:
        """The model whose requests are steps (None if it is one already)."""
        if isinstance(model, CairnModel):
            return None
        return CairnModel(
            model,
            step_name=f"{self.agent_name}.model_request",
            options=self.model_options,
            stream=self.stream,
        )

    def get_wrapper_toolset(
        self, toolset: AbstractToolset[AgentDepsT]
    ) -> AbstractToolset[AgentDepsT] | None:
        """The run's toolset, whose calls are steps but for the workflow tools."""
        return CairnToolset(
            toolset,
            prefix=f"{self.agent_name}.tool.",
            options=self.tool_options,
            in_workflow=frozenset(self.workflow_tools) | marked_tools([toolset]),
        )
