"""CairnAgent: a pydantic-ai agent whose run, called in a cairn workflow, is durable.

Like pydantic-ai's own TemporalAgent and DBOSAgent, it runs the wrapped agent with a
step-wrapped model and toolset (through the capability in steps.py, added to each run),
and returns what `agent.run` returns. It adds nothing to the agent's graph itself.
"""

from __future__ import annotations

from typing import Any, Generic

from pydantic_ai import Agent
from pydantic_ai.output import OutputDataT
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT

import cairn
from cairn.contrib.pydantic_ai import placement
from cairn.contrib.pydantic_ai.model import STREAMING_REFUSED, StepOptions
from cairn.contrib.pydantic_ai.steps import DurableSteps


class CairnAgent(Generic[AgentDepsT, OutputDataT]):
    """A pydantic-ai `Agent` whose model requests and tool calls are cairn steps.

    In workflow code, `await cairn_agent.run(prompt)` runs each model request as the step
    `<name>.model_request` and each tool call as the step `<name>.tool.<tool name>`
    (except the tools in `workflow_tools` or marked `@workflow_tool`, which run in the
    workflow). A run that crashes resumes from its recorded steps: the model is not asked
    again for the turns it answered, and a tool that completed is not called again.
    Outside workflow code it is the plain agent.

    Args:
        agent: the pydantic-ai agent to wrap.
        name: the stable prefix of its step names; defaults to the agent's `name`. One is
            required, because a run's history refers to its steps by name.
        model_retries: retries of a model request step (cairn's default if None).
        model_timeout: timeout of one model request attempt.
        tool_retries: retries of a tool call step.
        tool_timeout: timeout of one tool call attempt.
        workflow_tools: names of tools to run in workflow code instead of as steps.
        stream: the name of a durable stream that each model request streams its events
            to, in workflow code (None: requests are not streamed). Each chunk is a
            pydantic-ai `ModelResponseStreamEvent` in its JSON form; the agent run closes
            the stream when it ends. Readers use `engine.read_stream(run_id, stream)`.

    Raises:
        InvalidValue: when neither `name` nor the agent's name is given.
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, OutputDataT],
        *,
        name: str | None = None,
        model_retries: cairn.Retry | int | None = None,
        model_timeout: Any = None,
        tool_retries: cairn.Retry | int | None = None,
        tool_timeout: Any = None,
        workflow_tools: tuple[str, ...] | list[str] | frozenset[str] = (),
        stream: str | None = None,
    ) -> None:
        name = name or agent.name
        if not name:
            raise cairn.InvalidValue(
                "CairnAgent needs a name for its step names: pass name= or give the Agent one "
                "(Agent(..., name='support'))"
            )
        self.wrapped = agent
        self.name = name
        self.model_options = StepOptions(model_retries, model_timeout)
        self.tool_options = StepOptions(tool_retries, tool_timeout)
        self.workflow_tools = frozenset(workflow_tools)
        self.stream = stream

    async def run(
        self,
        user_prompt: Any = None,
        *,
        stream: str | None = None,
        **options: Any,
    ) -> AgentRunResult[Any]:
        """Run the agent, durably in workflow code; accepts what `Agent.run` accepts.

        Args:
            user_prompt: as for `Agent.run`.
            stream: the durable stream for this run's model events, instead of the one
                given to `CairnAgent` (see there).
            **options: as for `Agent.run`.

        Returns:
            What `Agent.run` returns: an `AgentRunResult`.

        Raises:
            InvalidArguments: in workflow code, for an `event_stream_handler` on the run
                or the agent (it would run inside a step, again on each retry: use
                `stream=` and `engine.read_stream`).
        """
        handler = options.get("event_stream_handler") or self.wrapped.event_stream_handler
        in_workflow = placement.in_workflow_code()
        if handler is not None and in_workflow:
            raise cairn.InvalidArguments(STREAMING_REFUSED.format(what="an event_stream_handler"))
        stream = (stream or self.stream) if in_workflow else None
        steps: DurableSteps[Any] = DurableSteps(
            self.name, self.model_options, self.tool_options, self.workflow_tools, stream
        )
        # First in the list: its wrappers are outermost, so a step holds every other
        # capability's model wrapper and toolset wrapper too.
        options["capabilities"] = [steps, *(options.get("capabilities") or ())]
        # Tools run one at a time, so that their steps start in the same order on replay.
        with self.wrapped.parallel_tool_call_execution_mode("sequential"):
            result: AgentRunResult[Any] = await self.wrapped.run(user_prompt, **options)
        if stream is not None:
            # Workflow code's close: a durable point, written once whatever the replays.
            await cairn.stream(stream).close()
        return result

    def run_stream(self, *args: Any, **kwargs: Any) -> Any:
        """The plain agent's `run_stream` outside workflow code; refused in it.

        Raises:
            InvalidArguments: in workflow code: its context manager hands out the model's
                stream live, which a step (run once, recorded) cannot; use `stream=`.
        """
        if placement.in_workflow_code():
            raise cairn.InvalidArguments(STREAMING_REFUSED.format(what="run_stream"))
        return self.wrapped.run_stream(*args, **kwargs)

    def run_stream_events(self, *args: Any, **kwargs: Any) -> Any:
        """The plain agent's `run_stream_events` outside workflow code; refused in it.

        Raises:
            InvalidArguments: in workflow code (as `run_stream`); use `stream=`.
        """
        if placement.in_workflow_code():
            raise cairn.InvalidArguments(STREAMING_REFUSED.format(what="run_stream_events"))
        return self.wrapped.run_stream_events(*args, **kwargs)
