"""The verbs that steer a run, declared once: what each is called and does on every surface.

One implementation per verb lives on `RunVerbs` (runtime/run_verbs.py; resume_hook on
`RunControl` itself), and RunControl serves it under the verb's name. Engine, TestEngine
and Client expose it as an explicit method of the same name and arguments (so mypy and
IDEs see the signature) that only delegates, its docstring opening with the verb's
summary. The CLI (cli/control.py) and the HTTP API (dashboard/api/verb_routes.py) build
their commands and routes, and the MCP server (mcp_server/tools.py) its tools, by looping
over VERBS: the command path, the route, the help line, the API's summary, body schema
and failure statuses, and each tool's description and input schema come from here.
tests/test_verbs.py checks every surface against this table, so a new verb starts here
and the test lists each place still missing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn import errors, names


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a verb's method, as the HTTP API and the MCP tools take it."""

    name: str
    """The parameter's name on RunControl (and the JSON field's, the tool argument's)."""
    schema: dict[str, Any]
    """Its JSON Schema, with a description of what it means."""
    required: bool = True
    """False when the method has a default for it."""


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


RUN_ID = Argument("run_id", _described(names.SCHEMA, "the run's id"))
BY = Argument("by", _described(names.SCHEMA, "who asks, recorded in the run's history"), False)
PAYLOAD = Argument("payload", {"description": "any JSON value (default: null)"}, False)


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
    arguments: tuple[Argument, ...]
    """The method's arguments in order, `self` aside (tests/test_verbs.py holds them to it)."""
    starts_run: bool = False
    """True when it answers with a new run (restart, fork) rather than the same one."""

    def schema(self, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
        """The JSON Schema of an object holding its arguments (but those in `leave_out`)."""
        kept = [a for a in self.arguments if a.name not in leave_out]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {a.name: a.schema for a in kept},
            "additionalProperties": False,
        }
        required = [a.name for a in kept if a.required]
        if required:
            schema["required"] = required
        return schema


VERBS = (
    Verb(
        "cancel",
        "Cancel a run: it ends CANCELLED at its current or next durable point",
        (errors.RunNotFound,),
        "runs cancel",
        "POST /runs/{run_id}/cancel",
        (RUN_ID,),
    ),
    Verb(
        "pause",
        "Pause a run at its next durable point (at once if it sleeps, waits or is queued)",
        (errors.RunNotFound,),
        "runs pause",
        "POST /runs/{run_id}/pause",
        (RUN_ID,),
    ),
    Verb(
        "resume",
        "Resume a paused run; timers and events that came meanwhile are honoured",
        (errors.RunNotFound,),
        "runs resume",
        "POST /runs/{run_id}/resume",
        (RUN_ID,),
    ),
    Verb(
        "retry",
        "Continue a FAILED run from its failed step (completed steps do not run again)",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName),
        "runs retry",
        "POST /runs/{run_id}/retry",
        (RUN_ID, BY),
    ),
    Verb(
        "restart",
        "Start a new run of the same workflow with the same input",
        (errors.RunNotFound, errors.InvalidName),
        "runs restart",
        "POST /runs/{run_id}/restart",
        (RUN_ID, BY),
        starts_run=True,
    ),
    Verb(
        "fork",
        "Start a new run reusing the recorded steps before a chosen history entry",
        (errors.RunNotFound, errors.InvalidName, ValueError),
        "runs fork",
        "POST /runs/{run_id}/fork",
        (
            RUN_ID,
            Argument(
                "from_step",
                {
                    "type": "integer",
                    "minimum": 1,
                    "description": "the history entry (seq) to run again, and all after it",
                },
            ),
            BY,
        ),
        starts_run=True,
    ),
    Verb(
        "send_event",
        "Send an event to a run; it is kept until a wait of the run takes it",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName, errors.SerializationError),
        "send",
        "POST /runs/{run_id}/events/{name}",
        (
            RUN_ID,
            Argument("name", _described(names.SCHEMA, "the event's name")),
            PAYLOAD,
            Argument(
                "idempotency_key",
                _described(names.SCHEMA, "send at most once per key: a repeat is ignored"),
                False,
            ),
        ),
    ),
    Verb(
        "resume_hook",
        "Call a hook once with its token and a payload",
        (errors.HookNotFound, errors.InvalidSubmission, errors.SerializationError),
        "hooks resume",
        "POST /hooks/{token}",
        (
            Argument(
                "token", {"type": "string", "minLength": 1, "description": "the hook's token"}
            ),
            PAYLOAD,
        ),
    ),
)
