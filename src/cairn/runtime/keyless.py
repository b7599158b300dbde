"""KeylessRuns: what a worker handed back because it lacks the key of its values, or the code.

A worker started without a key (mis-deployed, or still on old keys after a rotation)
must not fail the runs (or step attempts) it cannot decrypt, nor take them again and
again: it hands each back (runtime/executing.py, runtime/step_worker.py), leaves it out
of its claims for a back-off that doubles up to MAX_BACKOFF, so that a worker with the
key takes it meanwhile, and logs an error once per item and key, naming the key and
what to set. So too for a run started under another version of its workflow that this
worker's code cannot replay (a rolling deploy, core/signals.py OtherVersion): a worker
still running that version takes it. If none is left (killed, its lease run out), the
back-off ends early (`for_versions`): the next claim fails the run, rather than it wait
for a worker that will not come.
"""

from __future__ import annotations

from cairn.core.signals import KeyMissing, OtherVersion
from cairn.observability import logcontext
from cairn.store.records import RunRecord

log = logcontext.logger("cairn.worker")

FIRST_BACKOFF = 2.0
"""Seconds a run handed back for a missing key is left out of this worker's claims."""
MAX_BACKOFF = 300.0
"""The longest back-off: the key may come (a restart with it is another process)."""
MAX_LEFT_OUT = 1000
"""Run ids left out of one claim at most (the latest handed back): a bound on the SQL."""


def waiting_for(lacking: KeyMissing | OtherVersion) -> str:
    """What a run handed back for what `lacking` names waits for, in plain words."""
    return lacking.waiting_for


class KeylessRuns:
    """The runs handed back for a missing key, each with the time it may be claimed again."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self._logged: set[tuple[str, str]] = set()
        # Items handed back for their version: (workflow, the run's version).
        self._versions: dict[str, tuple[str, str]] = {}

    def handed_back(
        self,
        item: str,
        lacking: KeyMissing | OtherVersion,
        now: float,
        *,
        what: str,
        run: RunRecord | None,
    ) -> None:
        """Note that `item` (a run id, or a step attempt's task id) was handed back at `now`.

        `what` names it in the log ("run <id> (<workflow>)"); `run`, if known, for the
        log record's run attributes.
        """
        delay = min(self._backoff.get(item, FIRST_BACKOFF / 2) * 2, MAX_BACKOFF)
        self._backoff[item] = delay
        self._until.pop(item, None)  # re-inserted last: the latest are kept in claims
        self._until[item] = now + delay
        if isinstance(lacking, OtherVersion):
            self._versions[item] = (lacking.workflow, lacking.run_version)
        if (item, lacking.key_id) in self._logged:
            return
        self._logged.add((item, lacking.key_id))
        extra = None if run is None else logcontext.extra(run.run_id, run.workflow, run.attempt)
        if isinstance(lacking, OtherVersion):
            log.error(
                "%s: handed back, not failed: it waits for %s. Keep a worker of that version "
                "running until it ends, or make this code replay it (cairn.patched; see "
                "docs/howto/versioning.md)",
                what,
                lacking.waiting_for,
                extra=extra,
            )
            return
        log.error(
            "%s: cannot decrypt its values, encrypted with key %r, which this worker does "
            "not have; handed back for a worker with the key, not failed. Give this worker "
            "the key (CAIRN_KEYS or CAIRN_KEYS_FILE; see docs/howto/encryption.md). %s",
            what,
            lacking.key_id,
            lacking.message,
            extra=extra,
        )

    def left_out(self, now: float) -> list[str] | None:
        """The ids not to claim at `now` (None: none)."""
        for run_id in [r for r, until in self._until.items() if until <= now]:
            del self._until[run_id]  # its back-off is kept: the next one is longer
        if not self._until:
            return None
        return list(self._until)[-MAX_LEFT_OUT:]

    def backing_off(self, item: str, now: float) -> bool:
        """Whether `item` is not to be taken at `now` (a transport's `take` by id refuses it)."""
        until = self._until.get(item)
        return until is not None and until > now

    def forget(self, item: str) -> None:
        """`item` ended or parked here: its values were read after all."""
        if not self._until and not self._backoff and not self._versions:
            return  # nothing left out (nearly always): every run's end asks
        self._until.pop(item, None)
        self._backoff.pop(item, None)
        self._versions.pop(item, None)

    def for_versions(self, now: float) -> dict[tuple[str, str], list[str]]:
        """The items left out at `now` for their version, by (workflow, version)."""
        found: dict[tuple[str, str], list[str]] = {}
        for item, wanted in self._versions.items():
            until = self._until.get(item)
            if until is not None and until > now:
                found.setdefault(wanted, []).append(item)
        return found

    def end_backoff(self, item: str) -> None:
        """Take `item` in the next claim: no worker it was handed back for is left."""
        self._until.pop(item, None)
