"""A pydantic-ai model whose requests are cairn steps, recorded as JSON in the run's history.

As pydantic-ai's DBOS and Temporal integrations do, the wrapper sits between the agent and
its model: in workflow code each `request` is one step named `<agent>.model_request`, so a
replay gets the recorded response back instead of asking the model again.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponseStreamEvent,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

import cairn
from cairn.contrib.pydantic_ai import placement

RESPONSE = pydantic.TypeAdapter(ModelResponse)
PARAMETERS = pydantic.TypeAdapter(ModelRequestParameters)
EVENT = pydantic.TypeAdapter(ModelResponseStreamEvent)

STREAMING_REFUSED = (
    "a durable agent in workflow code does not take {what}: its model requests are steps "
    "whose events a reader cannot share live; use CairnAgent(..., stream=...) and "
    "engine.read_stream(run_id, name)"
)


@dataclass(frozen=True, slots=True)
class StepOptions:
    """The `retries` and `timeout` one kind of step is run with (cairn's defaults if None)."""

    retries: cairn.Retry | int | None = None
    timeout: Any = None


DEFAULT_OPTIONS = StepOptions()


def shown(messages: list[ModelMessage], parameters: ModelRequestParameters) -> tuple[Any, Any]:
    """The request as JSON for the history; a marker where pydantic cannot dump it."""
    try:
        return (
            ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
            PARAMETERS.dump_python(parameters, mode="json"),
        )
    except Exception as exc:  # showing the input must never fail the request
        return {"omitted": f"{type(exc).__name__}: {exc}"[:500]}, None


class CairnModel(WrapperModel):
    """Runs each request of the wrapped model as the step `<step_name>`, in workflow code.

    The step returns the response as pydantic's JSON form, which the run's history keeps
    whatever serializer the engine uses; the request's messages and parameters are its
    recorded input (for people reading the history: a replay never compares them).
    """

    def __init__(
        self, model: Model, *, step_name: str, options: StepOptions, stream: str | None = None
    ) -> None:
        super().__init__(model)
        self.step_name = step_name
        self.options = options
        self.stream = stream

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Ask the wrapped model, as a step when in workflow code."""
        if not placement.in_workflow_code():
            return await self.wrapped.request(messages, model_settings, model_request_parameters)

        async def model_request(*shown: Any) -> Any:
            # The live objects, not the recorded JSON: the model gets exactly what the
            # agent built. The step's arguments are there for the history only.
            if self.stream is None:
                response = await self.wrapped.request(
                    messages, model_settings, model_request_parameters
                )
            else:
                response = await self.streamed_request(
                    self.stream, messages, model_settings, model_request_parameters
                )
            return RESPONSE.dump_python(response, mode="json")

        recorded = await cairn.run_step(
            self.step_name,
            model_request,
            *shown(messages, model_request_parameters),
            retries=self.options.retries,
            timeout=self.options.timeout,
        )
        return RESPONSE.validate_python(recorded)

    async def streamed_request(
        self,
        name: str,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """In the step: the wrapped model's streamed response, each event written to `name`.

        Each event goes out as pydantic-ai's JSON form of it as it arrives; the step's
        result is the final response, so a replay neither asks the model nor writes again.
        """
        stream = cairn.stream(name)
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters
        ) as streamed:
            async for event in streamed:
                await stream.write(EVENT.dump_python(event, mode="json"))
            return streamed.get()

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """Refused in workflow code (a step's events cannot be handed out live); plain elsewhere.

        In workflow code the agent streams through `request` instead, when given a stream
        name: the step consumes the wrapped stream and writes it to a durable stream.
        """
        if placement.in_workflow_code():
            raise cairn.InvalidArguments(STREAMING_REFUSED.format(what="a streamed request"))
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as streamed:
            yield streamed
