"""Run context on log records: the run, workflow, step and attempt a record comes from.

The executor sets the run's facts around each attempt of a run (`enter_run`), and the
step's around each step attempt (`cairn.authoring.context.mark_in_step`);
`RunContextFilter` copies them onto records. It formats nothing and drops nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from cairn.authoring import context

# The attributes every record stamped here carries (None outside a run).
FIELDS = ("run_id", "workflow", "step", "attempt")

# (run id, workflow, the run's attempt) while an attempt of a run executes.
RunFacts = tuple[str, str, int]
_run: ContextVar[RunFacts | None] = ContextVar("cairn_log_run", default=None)


def enter_run(run_id: str, workflow: str, attempt: int) -> Token[RunFacts | None]:
    """Mark the current context as executing attempt `attempt` of run `run_id`."""
    return _run.set((run_id, workflow, attempt))


# Undo `enter_run` (the ContextVar's own method: no Python frame at every run's end).
leave_run: Callable[[Token[RunFacts | None]], None] = _run.reset


def current_run_id() -> str | None:
    """The id of the run whose attempt executes in this context, or None."""
    run = _run.get()
    return None if run is None else run[0]


def extra(run_id: str, workflow: str, attempt: int) -> dict[str, Any]:
    """The attributes of a record about a run logged outside its execution (`extra=`)."""
    return {"run_id": run_id, "workflow": workflow, "step": None, "attempt": attempt}


class RunContextFilter(logging.Filter):
    """Adds `run_id`, `workflow`, `step` and `attempt` to each record; drops none.

    Inside a run, `run_id` and `workflow` name it; inside a step's own code, `step` is the
    step's key (`name#n`, its n-th call in the run) and `attempt` the step's attempt
    number (1, 2, ... across retries); in workflow code `step` is None and `attempt` is
    the run's attempt. Outside a run all four are None, so a format string may name
    them anywhere. Attributes a record already has (from `extra=`) are kept.

    cairn's own loggers carry this filter. Add it to your handlers so that records of
    your loggers get the same attributes:

        handler.addFilter(cairn.observability.RunContextFilter())

    It reads the context of the thread that logs, so add it to a handler that runs
    there (with a `QueueHandler`, to the `QueueHandler`, not to the listener's handlers).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Stamp `record` with the run context; always True."""
        if not hasattr(record, "run_id"):
            stamp(record)
        return True


def stamp(record: logging.LogRecord) -> None:
    """Set the four run-context attributes on `record` from the current context."""
    run = _run.get()
    frame = context.step_frame()
    if run is None:
        record.run_id = record.workflow = record.attempt = None
    else:
        record.run_id, record.workflow, record.attempt = run
    if frame is None:
        record.step = None
    else:
        _, record.step, record.attempt = frame


_FILTER = RunContextFilter()


def logger(name: str) -> logging.Logger:
    """The logger `name`, carrying the run-context filter (how cairn gets its loggers)."""
    log = logging.getLogger(name)
    if _FILTER not in log.filters:
        log.addFilter(_FILTER)
    return log
