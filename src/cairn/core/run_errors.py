"""The stored form of a run's error: its type, message and traceback as JSON.

A step's failure (StepFailed) keeps the step's own error type and summary; any other
exception its type, text and traceback. Made where an attempt ends (core/executor.py).
"""

from __future__ import annotations

import json
from typing import Any

from cairn.core.failed_attempts import type_name
from cairn.errors import StepFailed
from cairn.tracebacks import user_traceback


def error_json(exc: BaseException, *, step: str | None = None, at: str | None = None) -> str:
    """The stored form of a run's error.

    `at` is the durable point (a step's or a wait's key) where a cancellation reached
    the workflow, shown as where the run stopped.
    """
    if isinstance(exc, StepFailed):
        data: dict[str, Any] = {
            "type": type_name(exc),
            "message": exc.summary,  # str() of the step's own error, when it is one, is not
            "traceback": exc.traceback,
            "step": exc.step_name,
            "cause_type": exc.error_type,
        }
    else:
        data = {
            "type": type_name(exc),
            "message": str(exc),
            "traceback": user_traceback(exc),
        }
        if step is not None:
            data["step"] = step
        if at is not None:
            data["at"] = at
    return json.dumps(data)
