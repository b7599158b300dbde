"""Every exception cairn raises, in one place.

The tree::

    CairnError
    ├── NotInRun                 an in-run function called outside a run
    ├── InvalidName              a name or id no store keeps (empty, > 255, NUL); a ValueError
    ├── InvalidArguments         arguments that do not fit the workflow's signature, or a
    │                            value of a type a cairn function cannot take; a TypeError
    ├── InvalidValue             a value a cairn function cannot use (a bad duration); a ValueError
    ├── UnknownWorkflow          a start by a name nobody here or lately knows; a LookupError
    ├── SerializationError       a value that cannot be stored
    │   └── KeyUnavailable       ... or read: encrypted under a key this process lacks
    ├── NonDeterminismError      replay met different work than was recorded
    ├── HistoryTooLong           a run's history would pass max_history entries
    ├── StepFailed               a step failed for good (retries exhausted or fatal)
    │   └── StepTimeout          ... because an attempt ran past its timeout
    ├── RetryableError           raised by user code: retry, maybe after retry_after
    ├── FatalError               raised by user code: never retry
    ├── RunFailed                awaiting a run that ended FAILED
    │   ├── ChildFailed          ... a child run, seen from its parent
    │   └── PoisonRun            ... recovered more than max_recoveries times
    ├── RunCancelled             awaiting a run that ended CANCELLED
    ├── RunNotFound              no run with that id
    ├── RunFinished              the run already ended
    ├── DuplicateSchedule        a schedule id taken by another definition; a ValueError
    ├── DuplicateRun             a dedup key is held by an active run
    ├── EventTimeout             a wait, hook or task expired
    ├── HookNotFound             unknown, used or expired hook token
    ├── InvalidSubmission        task values or a hook payload that do not fit the schema
    ├── TaskNotFound             no human task with that id
    ├── ScheduleNotFound         no schedule with that id
    ├── TransientWorkflow        a durable=False workflow asked to do what needs a database;
    │                            a ValueError
    ├── Unsupported              a feature with no meaning where the run executes (AWS Lambda)
    ├── StoreError               the database failed (driver error chained)
    │   ├── StoreUnavailable     ... for now: unreachable, locked, a conflict to retry
    │   ├── StoreRefused         ... for good: a value or name it will never accept
    │   └── SchemaTooNew         the database was migrated by newer code
    └── ConfigError              bad URL, module or setting

    BaseException
    └── Cancelled                delivered into a cancelled run; not an Exception on purpose

Usage errors (`usage = True` on the class: NotInRun, InvalidName, InvalidArguments,
InvalidValue, DuplicateSchedule, TransientWorkflow, Unsupported, ConfigError) say the code
calling cairn is wrong. Raised by a step's code, one fails the step at its first attempt
(retrying the same code cannot help), with the fix in its message.
"""

from __future__ import annotations

from typing import Any

from cairn import durations

# Re-exported: the root and the usage errors live in usage_errors (see its docstring).
from cairn.usage_errors import CairnError as CairnError
from cairn.usage_errors import InvalidArguments as InvalidArguments
from cairn.usage_errors import InvalidName as InvalidName
from cairn.usage_errors import InvalidValue as InvalidValue
from cairn.usage_errors import NotInRun as NotInRun


class UnknownWorkflow(CairnError, LookupError):
    """No workflow by that name is registered here or executed by a worker seen lately.

    `suggestions` are the closest known names (perhaps none); `seen_within` says how
    long ago a worker may have been seen ("7 days"). Starting it anyway, for workers
    that will know it, takes `allow_unknown=True` (`remedy` says so in the message).
    """

    def __init__(
        self,
        message: str = "",
        *,
        workflow: str = "",
        suggestions: tuple[str, ...] = (),
        seen_within: str = "",
        remedy: str = "pass allow_unknown=True",
    ) -> None:
        if not message:
            hint = f"; did you mean {' or '.join(map(repr, suggestions))}?" if suggestions else ""
            seen = f" seen in the last {seen_within}" if seen_within else ""
            message = (
                f"unknown workflow {workflow!r}: it is not registered in this process, and no "
                f"worker{seen} executes it{hint} (to queue it anyway for workers yet to come, "
                f"{remedy})"
            )
        super().__init__(message)
        self.workflow = workflow
        self.suggestions = tuple(suggestions)
        self.seen_within = seen_within

    def told(self, remedy: str) -> UnknownWorkflow:
        """The same error, its message naming another way to queue the run anyway."""
        return UnknownWorkflow(
            workflow=self.workflow,
            suggestions=self.suggestions,
            seen_within=self.seen_within,
            remedy=remedy,
        )


class SerializationError(CairnError):
    """A value could not be serialized for storage."""

    def __init__(self, message: str, *, what: str = "", type_name: str = "") -> None:
        super().__init__(message)
        self.what = what
        self.type_name = type_name


class KeyUnavailable(SerializationError):
    """A stored value is encrypted under a key this process does not have.

    `key_id` names the key (give it to the process in CAIRN_KEYS). A worker that meets
    one in a run hands the run back for a worker that has the key (core/run_values.py).
    """

    def __init__(self, message: str, *, key_id: str) -> None:
        super().__init__(message)
        self.key_id = key_id


class HistoryTooLong(CairnError):
    """A run's history would pass `max_history` entries: the run fails (see cairn.limits).

    Kept by the journal once raised, so workflow code catching it cannot hide it.
    """

    def __init__(self, message: str, *, limit: int = 0) -> None:
        super().__init__(message)
        self.limit = limit


class NonDeterminismError(CairnError):
    """The workflow code did different work on replay than its history records."""

    def __init__(
        self, message: str, *, expected: str = "", met: str = "", seq: int | None = None
    ) -> None:
        super().__init__(message)
        self.expected = expected
        self.met = met
        self.seq = seq  # the history position of the recorded entry replay could not match


class RetryableError(CairnError):
    """A step failure worth retrying, optionally not before `retry_after`."""

    def __init__(self, message: str = "", retry_after: Any = None) -> None:
        super().__init__(message or "retryable failure")
        self.retry_after = (
            None if retry_after is None else durations.parse(retry_after, what="retry_after")
        )


class FatalError(CairnError):
    """A step failure that must never be retried."""


class StepFailed(CairnError):
    """A step failed for good: its retries are exhausted or the error was fatal.

    The one a step call raises is also the step's own exception when cairn can rebuild it
    (its class, args, str() and attributes), with `summary` as a note: see
    `cairn.step_failures`, which also rebuilds one from `to_dict`. Alone, its message is
    `summary`.
    """

    def __init__(
        self,
        message: str = "",
        *,
        step_name: str = "",
        attempts: int = 0,
        error_type: str = "",
        error_message: str = "",
        traceback: str = "",
        fatal: bool = False,
    ) -> None:
        self.step_name = step_name
        self.attempts = attempts
        self.error_type = error_type
        self.error_message = error_message
        super().__init__(message or self.summary)
        self.traceback = traceback
        self.fatal = fatal

    @property
    def message(self) -> str:
        """The failing exception's own message."""
        return self.error_message

    @property
    def summary(self) -> str:
        """The failure in cairn's words.

        "step 'x' failed after 3 attempt(s): builtins.ValueError: ...".
        """
        return (
            f"step {self.step_name!r} failed after {self.attempts} attempt(s): "
            f"{self.error_type}: {self.error_message}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The facts of this failure, as stored in the journal."""
        return {
            "step_name": self.step_name,
            "attempts": self.attempts,
            "error_type": self.error_type,
            "message": self.error_message,
            "traceback": self.traceback,
            "fatal": self.fatal,
            "timeout": isinstance(self, StepTimeout),
        }


class StepTimeout(StepFailed):
    """A step attempt ran past its timeout."""


class RunFailed(CairnError):
    """The run ended FAILED."""

    def __init__(
        self,
        message: str = "",
        *,
        run_id: str = "",
        error_type: str = "",
        error_message: str = "",
        traceback: str = "",
    ) -> None:
        super().__init__(message or f"run {run_id!r} failed: {error_type}: {error_message}")
        self.run_id = run_id
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback


class ChildFailed(RunFailed):
    """A child run ended FAILED."""


class PoisonRun(RunFailed):
    """The run kept killing the processes that executed it and was given up."""


class RunCancelled(CairnError):
    """The run ended CANCELLED."""

    def __init__(self, message: str = "", *, run_id: str = "") -> None:
        super().__init__(message or f"run {run_id!r} was cancelled")
        self.run_id = run_id


class RunNotFound(CairnError):
    """No run has that id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class RunFinished(CairnError):
    """The run has already finished (`newest`, `now`: a CONTINUED run's newest, its status)."""

    def __init__(self, run_id: str, status: str, *, newest: str | None = None, now: str = ""):
        text = f"continued as new: {newest} ({now})" if newest else ""
        super().__init__(text or f"run {run_id!r} already finished ({status})")
        self.run_id, self.status, self.newest = run_id, status, newest


class DuplicateRun(CairnError):
    """An active run already holds that dedup key."""

    def __init__(self, message: str = "", *, run_id: str = "", dedup_key: str = "") -> None:
        super().__init__(message or f"dedup key {dedup_key!r} is held by active run {run_id!r}")
        self.run_id = run_id
        self.dedup_key = dedup_key


class EventTimeout(CairnError):
    """A wait for an event, hook or human task timed out."""


class HookNotFound(CairnError):
    """The hook token is unknown, already used or expired."""


class TaskNotFound(CairnError):
    """No human task has that id."""


class ScheduleNotFound(CairnError):
    """No schedule has that id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} not found")
        self.schedule_id = schedule_id


class DuplicateSchedule(CairnError, ValueError):
    """A schedule with that id exists with another definition."""

    usage = True


class TransientWorkflow(CairnError, ValueError):
    """A transient workflow (durable=False) was asked for something only durable runs do.

    Its runs live in the memory of the process that starts them, so nothing that hands a
    run to the database for later (a queue, a schedule, a worker, a durable parent) can
    take one. `workflow` names it; `refused` says what was asked.
    """

    usage = True

    def __init__(self, workflow: str, refused: str) -> None:
        super().__init__(
            f"workflow {workflow!r} is transient (durable=False): its runs live only in the "
            f"memory of the process that starts them, so {refused}"
        )
        self.workflow = workflow
        self.refused = refused


class InvalidSubmission(CairnError):
    """The submitted values do not fit the task's form, or a payload the hook's schema.

    `fields` maps each bad field (dotted path) to what is wrong with it; a problem with
    the value as a whole is listed under "(form)" for tasks, "(payload)" for hooks.
    """

    def __init__(self, message: str = "", *, fields: dict[str, str] | None = None) -> None:
        self.fields = dict(fields or {})
        detail = "; ".join(f"{k}: {v}" for k, v in self.fields.items())
        super().__init__(message or f"invalid submission: {detail}")


class Unsupported(CairnError):
    """A cairn feature that has no meaning where this run executes, refused at the call.

    A workflow served as an AWS Lambda durable function (`cairn.aws`) has no queues,
    schedules, step queues or emits; a step on a step queue has no durable streams.
    `feature` names the one asked for, `host` where the run (or step) executes, and the
    message says what to do instead.
    """

    usage = True

    def __init__(self, feature: str, host: str, instead: str = "") -> None:
        tail = f"; {instead}" if instead else ""
        super().__init__(f"{feature} is not supported on {host}{tail}")
        self.feature = feature
        self.host = host


class StoreError(CairnError):
    """The database failed."""


class StoreUnavailable(StoreError):
    """The database could not be reached or was busy; the same request may succeed later.

    A lost connection, a server restarting, a lock held too long, a serialization failure.
    cairn retries these itself. `unknown` is True when a write may have been applied
    before its reply was lost (PostgreSQL), so the caller cannot simply send it again.
    """

    def __init__(self, message: str | None = None, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


class StoreRefused(StoreError):
    """The database refused a write it will always refuse (a value too long, a bad byte).

    Retrying cannot help: the step or run whose write it was fails once, with this error.
    """


class SchemaTooNew(StoreError):
    """The database schema is newer than this version of cairn."""


class ConfigError(CairnError):
    """A setting, URL or module is wrong."""

    usage = True


class Cancelled(BaseException):
    """The run was cancelled.

    A BaseException, like asyncio.CancelledError, so that `except Exception` in user code
    does not swallow a cancellation.
    """
