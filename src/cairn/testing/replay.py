"""replay(history, workflow): run workflow code against a recorded history, offline.

Use it in tests (with golden histories checked in as JSON) to learn, before deploying,
whether changed workflow code still replays the runs already in flight.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from cairn.authoring.definitions import WorkflowDef, definition_of
from cairn.core.replay_run import ReplayRun
from cairn.models import History, HistoryEntry


def replay(
    history: History | list[HistoryEntry],
    workflow: WorkflowDef[Any, Any] | Any,
    *args: Any,
    **kwargs: Any,
) -> None:
    """Replay `workflow` against `history`; NonDeterminismError if the code drifted.

    The input defaults to the one the history records (`History.args`/`kwargs`). Replay
    stops without error where the history ends (a run still in flight).
    """
    if not args and not kwargs and isinstance(history, History):
        args, kwargs = history.args, history.kwargs
    definition = definition_of(workflow)
    if definition is None:
        raise TypeError(f"replay needs a @cairn.workflow, got {workflow!r}")
    run = ReplayRun(list(history), definition)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(run.execute(args, kwargs))
        except BaseException as exc:  # carried back to the caller's thread
            errors.append(exc)

    # A thread of its own, so replay() works inside a running event loop (async tests).
    thread = threading.Thread(target=target, name="cairn-replay")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
