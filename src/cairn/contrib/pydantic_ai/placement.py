"""Where the agent's code is running now: workflow code, a step's code, or no run at all.

Only workflow code turns model requests and tool calls into steps; inside a step (an agent
called from a step) or outside a run, the agent runs as plain pydantic-ai.
"""

from __future__ import annotations

import cairn


def in_workflow_code() -> bool:
    """True in a run's workflow code, False in a step's code or outside any run."""
    try:
        cairn.current_run()
    except cairn.NotInRun:
        return False
    try:
        cairn.current_step()
    except cairn.NotInRun:
        return True
    return False
