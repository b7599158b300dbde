"""Ignition's `exchange.workflows` names, for workflows written against it.

A workflow written for Ignition's runtime runs here with its imports changed:

    from cairn.compat.ignition import workflow, step, getWorkflows
    from cairn.steps.sleep import sleep_chunked

`workflow` and `step` are `cairn.workflow` and `cairn.step` (which take DBOS-style
`options={...}`). `getWorkflows()` is the runtime accessor of the run in progress; its
methods map onto cairn's primitives:

- `checkCancelled()` is `cairn.check_cancelled()`;
- `progress(text)` is `cairn.progress(text)`;
- `recvCommand(currentState=..., topic="cmd", timeoutSeconds=0, maxMessages=1)` is
  `cairn.receive(topic, ...)`: it returns the next command sent to the run
  (`engine.send_event(run_id, "cmd", {"cmd": "HOLD"})`, `cairn send`), or None when none
  came within the timeout. With `maxMessages` > 1 one receive takes up to that many queued
  commands; the first is returned and the others are kept, in order, for the next calls
  on the same topic, which return them without receiving again (none is dropped). The
  `currentState` given is stored as the run's `state` column, which `cairn runs`, the
  dashboard and `engine.list_runs(columns=...)` show.

Each receive is one history entry (the commands it took, or none), as `cairn.receive` is.
Commands still kept when the workflow returns were taken from the mailbox and are lost.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from cairn.authoring import context, primitives
from cairn.authoring.step import step
from cairn.authoring.workflow import workflow
from cairn.errors import InvalidArguments, InvalidValue

__all__ = ["STATE_COLUMN", "WorkflowsRuntime", "getWorkflows", "step", "workflow"]

STATE_COLUMN = "state"
"""The run column `recvCommand(currentState=...)` stores the state in."""

# Commands a receive took beyond the one it returned, per run attempt and topic. Keyed by
# the run's context, so a replay (a new context) rebuilds them from its recorded receives.
_kept: weakref.WeakKeyDictionary[Any, dict[str, deque[Any]]] = weakref.WeakKeyDictionary()


class WorkflowsRuntime:
    """What `getWorkflows()` returns: the run in progress, in Ignition's method names."""

    __slots__ = ("_run",)

    def __init__(self, run: Any) -> None:
        self._run = run

    def checkCancelled(self) -> None:
        """Raise `cairn.Cancelled` if the run was cancelled (`cairn.check_cancelled()`)."""
        primitives.check_cancelled()

    def progress(self, text: str, current: float | None = None, total: float | None = None) -> None:
        """Record the run's progress text, shown in its summary (`cairn.progress`)."""
        primitives.progress(text, current=current, total=total)

    def recvCommand(
        self,
        currentState: str | None = None,
        topic: str = "cmd",
        timeoutSeconds: float = 0,
        maxMessages: int = 1,
    ) -> Any:
        """The next command sent to this run on `topic`, or None if none came in time.

        Args:
            currentState: Stored as the run's `state` column (None leaves it as it is).
            topic: The event name commands are sent under.
            timeoutSeconds: How long to wait for one (0: take what is queued now).
            maxMessages: How many queued commands one receive may take; the ones past the
                first are returned by the next calls, in order.

        Returns:
            The command's payload as sent (a dict, usually), or None.
        """
        if currentState is not None:
            primitives.set_columns(**{STATE_COLUMN: currentState})
        kept = _kept.setdefault(self._run, {}).setdefault(topic, deque())
        if kept:
            return kept.popleft()
        if isinstance(timeoutSeconds, bool) or not isinstance(timeoutSeconds, int | float):
            raise InvalidValue(
                f"recvCommand: timeoutSeconds must be a number, got {timeoutSeconds!r}"
            )
        taken = primitives.receive(topic, max_messages=maxMessages, timeout=max(timeoutSeconds, 0))
        if not isinstance(taken, list):
            getattr(taken, "close", lambda: None)()  # an async workflow's coroutine, unawaited
            raise InvalidArguments(
                "recvCommand is for sync workflows (def, not async def); in async code use "
                "`await cairn.receive(topic, ...)`"
            )
        kept.extend(taken)
        return kept.popleft() if kept else None


def getWorkflows() -> WorkflowsRuntime:
    """The runtime accessor of the run in progress (raises NotInRun outside one)."""
    return WorkflowsRuntime(context.current("getWorkflows()"))
