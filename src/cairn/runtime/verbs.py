"""The verbs that steer a run, declared once: what each is called on every surface.

One implementation per verb lives on `RunControl`; its signature and docstring declare
the verb's arguments and meaning. Engine, TestEngine and Client expose it as an explicit
method of the same name and arguments (so mypy and IDEs see the signature) that only
delegates; the CLI and the HTTP API each call it from the command and route named here.
tests/test_verbs.py checks every surface against this table, so a new verb is added
here, implemented on RunControl, and the test lists each place still missing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn import errors


@dataclass(frozen=True, slots=True)
class Verb:
    """One verb: its method, the failures it raises, and its command and route."""

    name: str
    """The method's name on RunControl, Engine, TestEngine and Client."""
    raises: tuple[type[Exception], ...]
    """What the implementation raises for a bad target or argument (its docstring says when)."""
    command: str
    """`cairn` arguments before the run id, token or other positionals."""
    route: str
    """The HTTP API operation under /api/v1."""
    starts_run: bool = False
    """True when it answers with a new run (restart, fork) rather than the same one."""


VERBS = (
    Verb("cancel", (errors.RunNotFound,), "runs cancel", "POST /runs/{run_id}/cancel"),
    Verb("pause", (errors.RunNotFound,), "runs pause", "POST /runs/{run_id}/pause"),
    Verb("resume", (errors.RunNotFound,), "runs resume", "POST /runs/{run_id}/resume"),
    Verb(
        "retry",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName),
        "runs retry",
        "POST /runs/{run_id}/retry",
    ),
    Verb(
        "restart",
        (errors.RunNotFound, errors.InvalidName),
        "runs restart",
        "POST /runs/{run_id}/restart",
        starts_run=True,
    ),
    Verb(
        "fork",
        (errors.RunNotFound, errors.InvalidName, ValueError),
        "runs fork",
        "POST /runs/{run_id}/fork",
        starts_run=True,
    ),
    Verb(
        "send_event",
        (errors.RunNotFound, errors.RunFinished, errors.InvalidName, errors.SerializationError),
        "send",
        "POST /runs/{run_id}/events/{name}",
    ),
    Verb(
        "resume_hook",
        (errors.HookNotFound, errors.InvalidSubmission, errors.SerializationError),
        "hooks resume",
        "POST /hooks/{token}",
    ),
)
