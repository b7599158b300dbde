"""`cairn.aws.handler`: a cairn workflow as an AWS Lambda durable function's handler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_durable_execution_sdk_python.context import DurableContext
from aws_durable_execution_sdk_python.execution import durable_execution

from cairn import arguments
from cairn.authoring.definitions import WorkflowDef, definition_of
from cairn.authoring.registry import Registry, default_registry
from cairn.aws import codec, refusals
from cairn.aws.lambda_run import Invocation, LambdaRun
from cairn.errors import InvalidArguments


def handler(
    workflow: Any, *, boto3_client: Any = None, registry: Registry | None = None
) -> Callable[[Any, Any], Any]:
    """The Lambda handler that runs `workflow` as a durable execution.

    The invocation's event (a JSON object) gives the workflow's keyword arguments,
    converted to their annotated types as `cairn run` converts them; the handler returns
    the workflow's result as JSON (rich values in cairn's tagged form).

    Args:
        workflow: A @cairn.workflow (or a class that declares one).
        boto3_client: The Lambda client the SDK checkpoints with (default: its own).
        registry: Where the module's declarations are (default: cairn's), looked up for a
            `cairn.schedule` of the workflow.

    Returns:
        The handler, for the function's configuration (`module.handler`).

    Raises:
        TypeError: `workflow` is not a cairn workflow.
        Unsupported: an option of the workflow that has no meaning on Lambda (a queue,
            an event trigger, a timeout, durable=False, a schedule), named.
    """
    found = definition_of(workflow)
    if found is None:
        raise InvalidArguments(f"cairn.aws.handler needs a @cairn.workflow, got {workflow!r}")
    defn: WorkflowDef[Any, Any] = found
    refusals.check_workflow(defn)
    refusals.check_schedules(defn.name, (registry or default_registry).schedules.values())

    def run(event: Any, durable: DurableContext) -> Any:
        kwargs = _keywords(event, defn)
        arn = durable.state.durable_execution_arn
        result = LambdaRun(durable, defn, Invocation(), arn).execute((), kwargs)
        return codec.plain(result, f"result of workflow {defn.name!r}")

    run.__name__ = run.__qualname__ = f"handler_of_{defn.fn.__name__}"
    made: Callable[[Any, Any], Any] = durable_execution(run, boto3_client=boto3_client)
    return made


def _keywords(event: Any, workflow: WorkflowDef[Any, Any]) -> dict[str, Any]:
    """The event's keys as the workflow's keyword arguments, fitted to its signature."""
    if event is None:
        event = {}
    if not isinstance(event, Mapping):
        raise InvalidArguments(
            f"the event of workflow {workflow.name!r} must be a JSON object of its keyword "
            f"arguments, got {type(event).__name__}"
        )
    kwargs = codec.decoded(dict(event))
    _, fitted = arguments.fit(workflow.fn, (), kwargs, workflow=workflow.name)
    return fitted
