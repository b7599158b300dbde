"""The stored form of a run's error: its type, message and traceback as JSON.

A step's failure (StepFailed) keeps the step's own error type and summary; any other
exception its type, text and traceback. Made where an attempt ends (core/executor.py).
"""

from __future__ import annotations

import json
import traceback
from typing import Any

from cairn.core.failed_attempts import type_name
from cairn.errors import StepFailed


def error_json(exc: BaseException, *, step: str | None = None) -> str:
    """The stored form of a run's error."""
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
            "traceback": "".join(traceback.format_exception(exc)),
        }
        if step is not None:
            data["step"] = step
    return json.dumps(data)
