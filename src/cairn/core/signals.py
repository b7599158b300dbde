"""Internal control flow that user code must not catch: BaseExceptions, never exported."""

from __future__ import annotations

from cairn.errors import NonDeterminismError


class Suspend(BaseException):
    """Unwind the workflow: the run is parked (sleeping or waiting) and leaves memory."""

    def __init__(self, status: str, wake_at: float | None, waiting_for: str | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.wake_at = wake_at
        self.waiting_for = waiting_for


class Unwind(BaseException):
    """Abandon the attempt without writing: the run was taken over or the engine stops."""


class HandBack(BaseException):
    """Leave the attempt at a durable point: its worker stops and hands the run back.

    Steps already executing in other branches commit first; nothing else is written.
    """


class KeyMissing(HandBack):
    """Leave the attempt: a value of the run is encrypted under a key this worker lacks.

    Nothing is written; the worker hands the run back for a worker that has the key and
    leaves it alone for a while (runtime/executing.py). Raised by core/run_values.py.
    """

    def __init__(self, key_id: str, message: str) -> None:
        super().__init__(message)
        self.key_id = key_id
        self.message = message
        self.waiting_for = f"a worker with key {key_id!r} (a worker without it handed the run back)"


class OtherVersion(HandBack):
    """Leave the attempt: the run started under another version, which this code cannot replay.

    Nothing is written; as for KeyMissing, the worker hands the run back for a worker
    running that version and leaves it alone for a while (runtime/keyless.py), if a live
    worker may run it; if none, the run fails with `failure()`. Raised by the journal in
    place of the NonDeterminismError (core/journal.py); a run whose version is the code's
    own, or unknown on either side, fails with that error instead.
    """

    def __init__(
        self, workflow: str, run_version: str, code_version: str, error: NonDeterminismError
    ) -> None:
        super().__init__(str(error))
        self.workflow = workflow
        self.run_version = run_version
        self.code_version = code_version
        self.error = error
        self.key_id = f"version {run_version!r}"  # what this worker lacks, for the log
        self.message = str(error)
        # Shown on the run until its next claim, however long: a fact about the code, true
        # once the worker that handed it back is gone ("this worker" was not).
        self.waiting_for = (
            f"a worker running version {run_version!r} of workflow {workflow!r} (handed back "
            f"by a worker running version {code_version!r}, which cannot replay it: {error})"
        )

    def failure(self) -> NonDeterminismError:
        """The error the run fails with when no live worker runs its version."""
        error = self.error
        return NonDeterminismError(
            f"run of version {self.run_version!r} of workflow {self.workflow!r}, which no "
            f"live worker runs, and code of version {self.code_version!r} cannot replay it: "
            f"{error}",
            expected=error.expected,
            met=error.met,
            seq=error.seq,
        )


class ContinueAsNew(BaseException):
    """End this run as CONTINUED and start a fresh one with these arguments."""

    def __init__(self, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        super().__init__("continue_as_new")
        self.args_ = args
        self.kwargs = kwargs
