"""LambdaRun: the RunContext cairn's primitives use while a workflow runs as a Lambda handler.

Each primitive becomes one operation of the SDK's DurableContext (see cairn.aws for the
table): steps are checkpointed steps, sleeps the service's waits, waits for outside
systems callbacks, child workflows child contexts. What has no meaning on Lambda raises
cairn.errors.Unsupported at the call.

Operations run one at a time, in the order the workflow reaches them: in an async
workflow an awaited primitive blocks the loop while its operation runs, so the branches
of an `asyncio.gather` take their turns in the order given. Once an operation suspends
the invocation (a wait not yet over, a retry not yet due), no further operation starts
in it: the next invocation replays the same sequence up to that point.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_durable_execution_sdk_python.config import ChildConfig, Duration
from aws_durable_execution_sdk_python.context import DurableContext
from aws_durable_execution_sdk_python.exceptions import ChildContextError, SuspendExecution

from cairn import durations
from cairn.authoring import context
from cairn.authoring.retry import coerce
from cairn.authoring.transaction import TransactionDef
from cairn.aws import blocking, callbacks, codec, refusals, steps
from cairn.errors import ChildFailed, StepFailed, StepTimeout
from cairn.models import RunInfo

if TYPE_CHECKING:
    from cairn.authoring.definitions import StepDef, WorkflowDef


class Invocation:
    """What the runs of one invocation share: whether an operation suspended it."""

    suspended = False


class LambdaRun(context.RunContext):
    """One workflow (the handler's, or a child) running in a DurableContext."""

    def __init__(
        self,
        durable: DurableContext,
        workflow: WorkflowDef[Any, Any],
        invocation: Invocation,
        run_id: str,
        parent: LambdaRun | None = None,
    ) -> None:
        self.durable = durable
        self.run_id = run_id
        self.workflow = workflow
        self.invocation = invocation
        self.parent = parent
        self._keys: Counter[str] = Counter()  # step name -> calls so far: its keys name#n

    def execute(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run the workflow's code to its end with this run active; its result."""
        token = context.enter(self)
        try:
            if self.workflow.is_async:
                return blocking.run_to_end(lambda: self.workflow.fn(*args, **kwargs))
            return self.workflow.fn(*args, **kwargs)
        except StepFailed as exc:
            # Leaving the workflow, it ends the execution (or the child): say which step,
            # as a run's failure does under cairn worker, not the step's message alone.
            kind = StepTimeout if isinstance(exc, StepTimeout) else StepFailed
            raise kind(
                step_name=exc.step_name,
                attempts=exc.attempts,
                error_type=exc.error_type,
                error_message=exc.error_message,
                traceback=exc.traceback,
                fatal=exc.fatal,
            ) from None
        finally:
            context.leave(token)

    def operation(self, start: Callable[[], Any]) -> Any:
        """`start()`, one SDK operation; none once the invocation is suspended."""
        if self.invocation.suspended:
            raise SuspendExecution("an earlier operation suspended this invocation")
        try:
            return start()
        except SuspendExecution:
            self.invocation.suspended = True
            raise

    def deliver(self, start: Callable[[], Any]) -> Any:
        """The operation `start`: awaitable in an async workflow, done now in a sync one."""
        if self.workflow.is_async:
            return self._when_awaited(start)
        return self.operation(start)

    async def _when_awaited(self, start: Callable[[], Any]) -> Any:
        return self.operation(start)

    def told(self, message: str) -> None:
        """Log `message` through the SDK's logger (not again when replaying)."""
        self.durable.logger.info("cairn: %s", message)

    def info(self) -> RunInfo:
        """Facts about this run: its id is the execution's ARN (a child's: then `/name#n`)."""
        return RunInfo(
            run_id=self.run_id,
            workflow=self.workflow.name,
            attempt=1,
            started_at=self._started(),
            parent_id=None if self.parent is None else self.parent.run_id,
            version=self.workflow.version,
        )

    def _started(self) -> datetime:
        found = self.durable.state.get_execution_operation()
        when = getattr(found, "start_timestamp", None)
        return when if isinstance(when, datetime) else datetime.now(UTC)

    def call_step(
        self, step: StepDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A checkpointed step, retried as its Retry says."""
        if step.queue is not None:
            raise refusals.step_queue(step.name, step.queue)
        if isinstance(step, TransactionDef):
            raise refusals.transaction(step.name)
        if step.isolation == "process":
            raise refusals.isolation(step.name)
        return self._step(
            step.name, lambda: step.fn(*args, **kwargs), step.is_async, step.retry, step.timeout
        )

    def call_inline(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        retries: Any,
        timeout: Any,
        queue: str | None = None,
    ) -> Any:
        """`cairn.run_step`: a checkpointed step called `name`."""
        if queue is not None:
            raise refusals.step_queue(name, queue)
        seconds = None if timeout is None else durations.seconds(timeout, what="step timeout")
        return self._step(
            name,
            lambda: fn(*args, **kwargs),
            asyncio.iscoroutinefunction(fn),
            coerce(retries),
            seconds,
        )

    def _step(
        self, name: str, call: Callable[[], Any], is_async: bool, retry: Any, timeout: Any
    ) -> Any:
        self._keys[name] += 1
        key = f"{name}#{self._keys[name]}"
        return self.deliver(
            lambda: steps.run(
                self.durable,
                name,
                key,
                call,
                is_async,
                retry,
                timeout,
                self.workflow.max_recoveries,
            )
        )

    def call_child(
        self, workflow: WorkflowDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A child workflow as a child context named after it; its result."""
        refusals.check_workflow(workflow)
        self._keys[workflow.name] += 1
        run_id = f"{self.run_id}/{workflow.name}#{self._keys[workflow.name]}"

        def body(durable: DurableContext) -> Any:
            child = LambdaRun(durable, workflow, self.invocation, run_id, self)
            return child.execute(args, kwargs)

        def start() -> Any:
            config: ChildConfig[Any] = ChildConfig(serdes=codec.SERDES)
            try:
                return self.durable.run_in_child_context(body, workflow.name, config)
            except ChildContextError as exc:
                raise ChildFailed(
                    f"child workflow {workflow.name!r} failed: {exc.error_type}: {exc.message}",
                    run_id=workflow.name,
                    error_type=exc.error_type,
                    error_message=exc.message or "",
                ) from None

        return self.deliver(start)

    def sleep(self, seconds: float, name: str | None = None) -> Any:
        """The service's wait: whole seconds, at least one; nothing for none at all."""
        if seconds <= 0:
            return self.deliver(lambda: None)
        return self._wait(seconds, name)

    def sleep_until(self, when: datetime, name: str | None = None) -> Any:
        """The service's wait until `when` (at least a second, so a replay meets it again)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return self._wait((when - datetime.now(UTC)).total_seconds(), name)

    def _wait(self, seconds: float, name: str | None) -> Any:
        duration = Duration(seconds=max(1, math.ceil(seconds)))
        return self.deliver(lambda: self.durable.wait(duration, name or "sleep"))

    def wait_for_event(self, name: str, timeout: float | None, default: Any) -> Any:
        """A callback `event:NAME` (see cairn.aws.callbacks)."""
        return callbacks.wait_for_event(self, name, timeout, default)

    def create_hook(self, name: str, timeout: float | None, schema: Any) -> Any:
        """A callback `hook:NAME`; the Hook's token is its callback id."""
        return callbacks.create_hook(self, name, timeout, schema)

    def human_task(
        self,
        name: str,
        title: str,
        data: Any,
        form: Any,
        assignee: str | None,
        timeout: float | None,
    ) -> Any:
        """A callback `task:NAME`, logged with the task; the submitted values."""
        return callbacks.human_task(self, name, title, data, form, assignee, timeout)

    def set_columns(self, values: dict[str, Any]) -> None:
        """Logged: Lambda keeps no searchable columns."""
        self.told(f"columns {codec.plain(values, 'cairn.set_columns values')}")

    def progress(self, message: str, current: float | None, total: float | None) -> None:
        """Logged: Lambda shows no progress."""
        count = (
            "" if current is None else f" ({current:g}/{'?' if total is None else f'{total:g}'})"
        )
        self.told(f"progress: {message}{count}")

    def check_cancelled(self) -> None:
        """Nothing: a stopped execution (StopDurableExecution) is not invoked again."""

    def patched(self, change_id: str) -> bool:
        """True: an execution replays on the function version it started on."""
        return True

    def deprecate_patch(self, change_id: str) -> None:
        """Nothing: an execution replays on the function version it started on."""

    def start_child(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        detached: bool,
    ) -> Any:
        """Refused: a child context runs while its parent waits for it."""
        raise refusals.refused("cairn.start_child()")

    def schedule_workflow(
        self,
        workflow: WorkflowDef[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        run_at: Any,
        delay: Any,
    ) -> Any:
        """Refused: nothing on Lambda starts a detached run at a later time."""
        raise refusals.refused("cairn.schedule_workflow()")

    def stream(self, name: str) -> Any:
        """Refused: there is no cairn database for readers to follow a stream in."""
        raise refusals.refused("cairn.stream()")

    def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Refused: an execution cannot hand over to a fresh one."""
        raise refusals.refused("cairn.continue_as_new()")

    def receive(self, topic: str, max_messages: int, timeout: float | None) -> Any:
        """Refused: callbacks take one payload each; there is no mailbox."""
        raise refusals.refused("cairn.receive()")

    def emit(self, event_type: str, payload: Any, key: str | None) -> Any:
        """Refused: there are no subscribed workflows to start."""
        raise refusals.refused("cairn.emit()")
