"""What a cairn worker takes from its broker: messages naming runs or one step attempt.

A message cairn publishes is Celery's (protocol 2): headers with the task name
("cairn.run", "cairn.runs" or "cairn.step") and a message id, a JSON body `[[id], {}, {...}]`
(`[[[id, id, ...]], {}, {...}]` for "cairn.runs", a batch of run ids). Anything
else that reaches a cairn queue (a `null` or integer body, no id, an id that is not a
string, a body that is not JSON) would make Celery's consumer raise, and its worker stop
("Unrecoverable error"); redelivered, it would stop the next one. `Consumer` checks each
message first: one it cannot use is logged once and rejected without requeue (dropped, or
dead-lettered where the broker has a dead-letter exchange), never fatal.
"""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

from cairn.celery.batching import BATCH_LIMIT
from cairn.observability import logcontext

log = logcontext.logger("cairn.celery")

TASKS = ("cairn.run", "cairn.runs", "cairn.step")


def problem(message: Any) -> str | None:
    """Why `message` cannot start a cairn task, or None when it can."""
    headers = message.headers
    if not isinstance(headers, dict):
        return "it has no headers"
    task = headers.get("task")
    if task not in TASKS:
        return f"task {task!r} is not one of {', '.join(TASKS)}"
    if not isinstance(headers.get("id"), str) or not headers["id"]:
        return "it has no message id"
    try:
        body = message.decode()
    except Exception as exc:
        return f"its body cannot be decoded ({type(exc).__name__}: {exc})"
    if not (isinstance(body, list | tuple) and len(body) == 3):
        return f"its body is {_short(body)}, not [[id], {{}}, {{...}}]"
    args, kwargs, embed = body
    if task == "cairn.runs":
        ids = args[0] if isinstance(args, list | tuple) and len(args) == 1 else None
        if not (
            isinstance(ids, list | tuple)
            and 0 < len(ids) <= BATCH_LIMIT
            and all(isinstance(i, str) for i in ids)
        ):
            return f"its arguments are {_short(args)}, not one list of 1 to {BATCH_LIMIT} ids"
    elif not (isinstance(args, list | tuple) and len(args) == 1 and isinstance(args[0], str)):
        return f"its arguments are {_short(args)}, not one id (a string)"
    if kwargs or not isinstance(kwargs, dict) or not isinstance(embed, dict):
        return "its body is not [[id], {}, {...}]"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def drop(message: Any, why: str) -> None:
    """Log `message` once and reject it for good."""
    headers = message.headers if isinstance(message.headers, dict) else {}
    queue = (message.delivery_info or {}).get("routing_key")
    log.error(
        "cairn: dropped a message on queue %r (task %r, id %r): %s",
        queue,
        headers.get("task"),
        headers.get("id"),
        why,
    )
    try:
        message.reject(requeue=False)
    except Exception as exc:  # already settled, or its connection is gone
        log.warning("cairn: could not reject the dropped message: %s", exc)


class Consumer(CeleryConsumer):  # type: ignore[misc]
    """Celery's consumer, checking each task message before Celery takes it (`problem`)."""

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's handler of task messages, behind `problem`'s check."""
        handle = super().create_task_handler(*args, **kwargs)

        def on_task_received(message: Any) -> Any:
            why = problem(message)
            if why is None:
                try:
                    return handle(message)
                except Exception as exc:  # what else Celery's request cannot take
                    why = f"Celery could not take it ({type(exc).__name__}: {exc})"
            drop(message, why)
            return None

        return on_task_received
