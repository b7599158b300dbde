"""The verbs that steer a run, declared once: what each is called and does on every surface.

One implementation per verb lives on `RunVerbs` (runtime/run_verbs.py; resume_hook on
`RunControl` itself), and RunControl serves it under the verb's name. Engine, TestEngine
and Client expose it as an explicit method of the same name and arguments (so mypy and
IDEs see the signature) that only delegates, its docstring opening with the verb's
summary. The CLI (cli/control.py) and the HTTP API (dashboard/api/verb_routes.py) build
their commands and routes by looping over VERBS: the command path, the route, the help
line and the API's summary and failure statuses come from here. tests/test_verbs.py
checks every surface against this table, so a new verb starts here and the test lists
each place still missing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn import errors


@dataclass(frozen=True, slots=True)
class Verb:
    """One verb: its method, what it does, the failures it raises, its command and route."""

    name: str
    """The method's name on RunVerbs (or RunControl), Engine, TestEngine and Client."""
    summary: str
    """What it does, in one line without a final period: the first line of each method's
    docstring (with the period), the CLI's help line and the API operation's summary.
    Kept here rather than read from a docstring, which `python -OO` strips."""
    raises: tuple[type[Exception], ...]
    """What the implementation raises for a bad target or argument (its docstring says when)."""
    command: str
    """`cairn` arguments before the run id, token or other positionals."""
    route: str
    """The HTTP API operation under /api/v1."""
    starts_run: bool = False
    """True when it answers with a new run (restart, fork) rather than the same one."""


VERBS = (
    Verb(
        "cancel",
        "Cancel a run: it ends CANCELLED at its current or next durable point",
        (errors.RunNotFound,),
        "runs cancel",
        "POST /runs/{run_id}/cancel",
    ),
    Verb(
        "pause",
        "Pause a run at its next durable point (at once if it sleeps, waits or is queued)",
        (errors.RunNotFound,),
        "runs pause",
        "POST /runs/{run_id}/pause",
    ),
    Verb(
        "resume",
        "Resume a paused run; timers and events that came meanwhile are honoured",
        (errors.RunNotFound,),
        "runs resume",
        "POST /runs/{run_id}/resume",
    ),
    Verb(
        "retry",
        "Continue a FAILED run from its failed step (completed steps do not run again)",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName),
        "runs retry",
        "POST /runs/{run_id}/retry",
    ),
    Verb(
        "restart",
        "Start a new run of the same workflow with the same input",
        (errors.RunNotFound, errors.InvalidName),
        "runs restart",
        "POST /runs/{run_id}/restart",
        starts_run=True,
    ),
    Verb(
        "fork",
        "Start a new run reusing the recorded steps before a chosen history entry",
        (errors.RunNotFound, errors.InvalidName, ValueError),
        "runs fork",
        "POST /runs/{run_id}/fork",
        starts_run=True,
    ),
    Verb(
        "send_event",
        "Send an event to a run; it is kept until a wait of the run takes it",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName, errors.SerializationError),
        "send",
        "POST /runs/{run_id}/events/{name}",
    ),
    Verb(
        "resume_hook",
        "Call a hook once with its token and a payload",
        (errors.HookNotFound, errors.InvalidSubmission, errors.SerializationError),
        "hooks resume",
        "POST /hooks/{token}",
    ),
)
