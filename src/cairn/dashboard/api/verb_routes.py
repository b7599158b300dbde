"""The routes of the verbs that steer a run, built from their declaration (runtime/verbs.py).

Each `Verb` gives its route, its summary and the failures it raises; what HTTP adds is
here, per verb: the handler, the body, the status of a success and the failures the API's
own checks add. The statuses of all those failures come from `replies.status_for`, the
one mapping the answers themselves use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cairn.dashboard.api import actions, hooks, runs
from cairn.dashboard.api.operations import Handler, Operation
from cairn.dashboard.api.replies import status_for
from cairn.errors import InvalidName, RunFinished
from cairn.runtime.verbs import VERBS, Verb


@dataclass(frozen=True, slots=True)
class Served:
    """How the API serves one verb, beyond what its `Verb` declares."""

    handler: Handler
    """Reads the call, calls the verb and returns the reply."""
    body: dict[str, Any] | None = None
    """JSON Schema of the request body; None: the verb's arguments not in its path."""
    ok: int = 200
    """The status of a success."""
    refuses: tuple[type[Exception], ...] = ()
    """Failures the API raises besides the verb's own (a verb a finished run cannot take)."""
    public: bool = False
    """True when a token does not guard it (a hook's token is its credential)."""
    description: str | None = None
    """More than the verb's summary, for the OpenAPI document."""


# What a run's id in the path adds: one that is not a name (over 255 characters) is a 422.
_NAMED = (InvalidName,)

SERVED = {
    "cancel": Served(actions.bodiless(actions.cancel_run), refuses=(RunFinished, *_NAMED)),
    "pause": Served(actions.bodiless(actions.pause_run), refuses=(RunFinished, *_NAMED)),
    "resume": Served(actions.bodiless(actions.resume_run), refuses=(RunFinished, *_NAMED)),
    "retry": Served(actions.retry),
    "restart": Served(actions.restart, ok=201),
    "fork": Served(actions.fork, ok=201),
    "send_event": Served(
        actions.send_event,
        ok=202,
        description="`awaited` says whether a wait of the run takes the event now; if not, "
        "`note` says what the run waits for.",
    ),
    "resume_hook": Served(
        hooks.call_hook,
        {
            "description": "the hook's payload: any JSON value that fits the hook's schema "
            "(`create_hook(schema=)`), if it has one"
        },
        ok=202,
        public=True,
        description="Needs no dashboard token: the hook's token is the credential.",
    ),
}

# A run id may hold `/`, so its parameter matches the rest of the path (see api/paths.py).
_RUN_ID = re.compile(r"^/runs/{run_id}")
_PARAMETER = re.compile(r"{(\w+)}")


def operation(verb: Verb) -> Operation:
    """The API operation of `verb`, at its declared route."""
    served = SERVED[verb.name]
    method, template = verb.route.split(" ", 1)
    failures = (*verb.raises, *served.refuses)
    body = served.body
    if body is None:
        body = verb.schema(leave_out=tuple(_PARAMETER.findall(template)))
    return Operation(
        method,
        _RUN_ID.sub(runs.RUN, template),
        served.handler,
        verb.summary,
        ok=served.ok,
        body=body,
        errors=tuple(sorted({status_for(failure) for failure in failures})),
        public=served.public,
        description=served.description,
    )


OPERATIONS = tuple(operation(verb) for verb in VERBS)
