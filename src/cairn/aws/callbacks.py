"""Waits for outside systems as the SDK's callbacks: events, hooks and human tasks.

Each is one callback operation, named `event:NAME`, `hook:NAME` or `task:NAME` in the
execution's history; its callback id is the token the outside system sends the payload
with (SendDurableExecutionCallbackSuccess). The callback is created when the primitive
is called and its payload taken when the workflow waits for it, so hooks created before
they are awaited are all handed out at once. Payloads are JSON (cairn's tagged values
read back), checked against a hook's schema or a task's form.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from aws_durable_execution_sdk_python.config import CallbackConfig, Duration
from aws_durable_execution_sdk_python.context import Callback, DurableContext
from aws_durable_execution_sdk_python.exceptions import CallbackTimeoutError

from cairn.authoring import context, forms
from cairn.authoring.hook import Hook
from cairn.aws import codec
from cairn.errors import EventTimeout


class CallbackRun(Protocol):
    """What a callback needs of the run that waits on it.

    LambdaRun (aws/lambda_run.py) is the one implementation; it hands itself to these
    functions, typed as this Protocol so this module does not import it back.
    """

    @property
    def durable(self) -> DurableContext:
        """The SDK's context of the execution, which creates the callbacks."""
        ...

    def operation(self, start: Callable[[], Any]) -> Any:
        """`start()`, one SDK operation; none once the invocation is suspended."""
        ...

    def deliver(self, start: Callable[[], Any]) -> Any:
        """The operation `start`: awaitable in an async workflow, done now in a sync one."""
        ...

    def told(self, message: str) -> None:
        """Log `message` through the SDK's logger."""
        ...


def _config(timeout: float | None) -> CallbackConfig:
    """A callback's timeout in whole seconds, at least one; none (0) without one."""
    seconds = 0 if timeout is None else max(1, math.ceil(timeout))
    return CallbackConfig(timeout=Duration(seconds=seconds))


def _taken(callback: Callback[Any], what: str, default: Any, schema: Any, whole: str) -> Any:
    """The payload sent to `callback`, checked against `schema` (None: any)."""
    try:
        text = callback.result()
    except CallbackTimeoutError as exc:
        if default is not context.MISSING:
            return default
        raise EventTimeout(f"{what} timed out ({exc.message or 'no call in time'})") from None
    value = codec.payload(text, what)
    if schema is None:
        return value
    schema_text, model_path = forms.describe_form(schema)
    checked = forms.validate(value, schema_text, model_path, whole=whole)
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        return schema.model_validate(checked)
    return checked


def wait_for_event(run: CallbackRun, name: str, timeout: float | None, default: Any) -> Any:
    """A callback `event:NAME`: its payload, `default` or EventTimeout on timeout."""
    what = f"event {name!r}"
    callback = run.operation(lambda: run.durable.create_callback(f"event:{name}", _config(timeout)))
    run.told(f"waiting for {what}: callback id {callback.callback_id}")
    return run.deliver(lambda: _taken(callback, what, default, None, "(payload)"))


def create_hook(run: CallbackRun, name: str, timeout: float | None, schema: Any) -> Any:
    """A Hook whose token is the callback id of `hook:NAME`."""
    forms.describe_form(schema, what=f"schema of hook {name!r}")  # a bad schema fails here
    what = f"hook {name!r}"
    callback = run.operation(lambda: run.durable.create_callback(f"hook:{name}", _config(timeout)))
    expires = None if timeout is None else datetime.now(UTC) + timedelta(seconds=timeout)

    def wait() -> Any:
        return run.deliver(lambda: _taken(callback, what, context.MISSING, schema, "(payload)"))

    hook = Hook(name, callback.callback_id, expires, wait)
    return run.deliver(lambda: hook)


def human_task(
    run: CallbackRun,
    name: str,
    title: str,
    data: Any,
    form: Any,
    assignee: str | None,
    timeout: float | None,
) -> Any:
    """A callback `task:NAME`, logged with what the person sees; the values submitted."""
    schema_text, _ = forms.describe_form(form)
    what = f"human task {name!r}"
    callback = run.operation(lambda: run.durable.create_callback(f"task:{name}", _config(timeout)))
    told = {"title": title, "data": codec.plain(data, f"data of {what}"), "assignee": assignee}
    if schema_text is not None:
        told["form"] = json.loads(schema_text)
    run.told(f"{what} waits: callback id {callback.callback_id}: {json.dumps(told)}")
    return run.deliver(lambda: _taken(callback, what, context.MISSING, form, "(form)"))
