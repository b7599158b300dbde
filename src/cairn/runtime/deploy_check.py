"""The pre-deploy check: replay every unfinished run against the code imported now.

Offline: each run's history is read and its workflow function called against it with
`testing.replay.ReplayRun`, so no step runs, nothing is written and no lease is taken.
The report says, per workflow and version, how many runs replay cleanly and where each
other one diverges, and for each `cairn.patched()` id how many runs still predate it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from cairn.authoring.registry import Registry
from cairn.codecs import coded
from cairn.core import journal
from cairn.core.replay_run import ReplayRun
from cairn.errors import NonDeterminismError
from cairn.models import HistoryEntry, RunStatus
from cairn.serialization import Serializer
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import Store
from cairn.store.records import RunQuery, RunRecord, StepRecord

UNFINISHED = tuple(status.value for status in RunStatus if not status.finished)
PAGE = 1000
# A replay only runs workflow code between recorded outcomes; one that takes longer than
# this is waiting on something that is not durable, and is reported instead of hanging.
REPLAY_TIMEOUT = 10.0


@dataclass(frozen=True)
class Divergence:
    """One run the code imported now cannot continue."""

    run_id: str
    workflow: str
    version: str | None
    seq: int | None  # the history position replay could not match (None: not an entry)
    code: str  # what the code did there ("started step 'charge'")
    history: str  # what the history records there ("step 'reserve#1' (history seq 3)")

    def describe(self) -> str:
        """One line: the run, what the code does and what the history has."""
        where = f" at seq {self.seq}" if self.seq is not None else ""
        return f"run {self.run_id}{where}: code {self.code}, history has {self.history}"


@dataclass
class WorkflowCheck:
    """The runs of one workflow and version.

    `cache_misses` are runs of a workflow whose step names are cache keys (a
    `cairn.WorkflowEntrypoint`) that continue, but whose code asks for a key the history
    lacks: the history's entries from there are not reached and those steps run again.
    They count as clean (nothing fails) and are listed so that the names can be fixed.
    """

    workflow: str
    version: str | None
    runs: int = 0
    clean: int = 0
    diverged: list[Divergence] = field(default_factory=list)
    cache_misses: list[Divergence] = field(default_factory=list)


@dataclass(frozen=True)
class PatchCheck:
    """A `cairn.patched()` id and the unfinished runs that still predate it."""

    change_id: str
    predating: int

    @property
    def safe_to_remove(self) -> bool:
        """True when no unfinished run takes the old branch any more."""
        return self.predating == 0


@dataclass
class CheckReport:
    """What `engine.check()` and `cairn check --db` found."""

    workflows: list[WorkflowCheck]
    patches: list[PatchCheck]

    @property
    def runs(self) -> int:
        """Runs replayed."""
        return sum(w.runs for w in self.workflows)

    @property
    def divergences(self) -> list[Divergence]:
        """Every run that would diverge, by workflow."""
        return [d for w in self.workflows for d in w.diverged]

    @property
    def cache_misses(self) -> list[Divergence]:
        """Every run whose step names miss its history (they re-run, see WorkflowCheck)."""
        return [m for w in self.workflows for m in w.cache_misses]

    @property
    def ok(self) -> bool:
        """True when every run replays cleanly."""
        return not self.divergences

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`cairn check --db --json`)."""
        return {
            "ok": self.ok,
            "runs": self.runs,
            "diverged": len(self.divergences),
            "cache_misses": len(self.cache_misses),
            "workflows": [
                {
                    **asdict(w),
                    "diverged": [asdict(d) for d in w.diverged],
                    "cache_misses": [asdict(m) for m in w.cache_misses],
                }
                for w in self.workflows
            ],
            "patches": [
                {"id": p.change_id, "predating": p.predating, "safe_to_remove": p.safe_to_remove}
                for p in self.patches
            ],
        }


async def check(
    store: Store,
    registry: Registry,
    serializer: Serializer,
    *,
    workflow: str | None = None,
    sample: int | None = None,
) -> CheckReport:
    """Replay the unfinished runs (all, or `sample` per workflow) of `workflow` (or all)."""
    if sample is not None and sample < 1:
        raise ValueError(f"sample must be at least 1, got {sample!r}")
    runs = await _unfinished(store, workflow, sample)
    histories = [(run, await store.read(journal_ops.load_journal(run.run_id))) for run in runs]
    return await asyncio.to_thread(_replay_all, histories, registry, serializer)


async def _unfinished(store: Store, workflow: str | None, sample: int | None) -> list[RunRecord]:
    taken: dict[str, int] = defaultdict(int)
    found: list[RunRecord] = []
    for status in UNFINISHED:
        cursor = None
        while True:
            page = await store.read(
                run_ops.list_runs(
                    RunQuery(status=status, workflow=workflow, limit=PAGE, cursor=cursor)
                )
            )
            for run in page:
                if sample is None or taken[run.workflow] < sample:
                    taken[run.workflow] += 1
                    found.append(run)
            if len(page) < PAGE:
                break
            cursor = (page[-1].created_at, page[-1].run_id)
    return found


def _replay_all(
    histories: Iterable[tuple[RunRecord, list[StepRecord]]],
    registry: Registry,
    serializer: Serializer,
) -> CheckReport:
    # One event loop, in a thread of its own, for every replay: the caller's loop (an
    # engine's, a test's) is never blocked by workflow code.
    return asyncio.run(_replay_each(histories, registry, serializer))


async def _replay_each(
    histories: Iterable[tuple[RunRecord, list[StepRecord]]],
    registry: Registry,
    serializer: Serializer,
) -> CheckReport:
    groups: dict[tuple[str, str | None], WorkflowCheck] = {}
    predating: dict[str, int] = defaultdict(int)
    for run, records in histories:
        group = groups.get((run.workflow, run.version))
        if group is None:
            group = groups[(run.workflow, run.version)] = WorkflowCheck(run.workflow, run.version)
        group.runs += 1
        divergence, patches, miss = await _replay_one(run, records, registry, serializer)
        for change_id, new_path in patches.items():
            predating[change_id] += 0 if new_path else 1
        if divergence is None:
            group.clean += 1
        else:
            group.diverged.append(divergence)
        if miss is not None:
            group.cache_misses.append(miss)
    workflows = sorted(groups.values(), key=lambda g: (g.workflow, g.version or ""))
    patch_checks = [PatchCheck(cid, n) for cid, n in sorted(predating.items())]
    return CheckReport(workflows, patch_checks)


async def _replay_one(
    run: RunRecord, records: list[StepRecord], registry: Registry, serializer: Serializer
) -> tuple[Divergence | None, dict[str, bool], Divergence | None]:
    """(its divergence, the patches it asked about, where its step names miss the history)."""

    def diverged(seq: int | None, code: str, history: str) -> Divergence:
        return Divergence(run.run_id, run.workflow, run.version, seq, code, history)

    defn = registry.workflows.get(run.workflow)
    if defn is None:
        return diverged(None, "has no workflow of this name", "a run of it in flight"), {}, None
    try:
        payload = serializer.loads(run.args)
        args, kwargs = tuple(payload.get("args", ())), dict(payload.get("kwargs", {}))
        replay = ReplayRun([_entry(r, serializer) for r in records], defn)
    except Exception as exc:
        return (
            diverged(None, f"cannot read the run's input ({exc})", "the stored input"),
            {},
            None,
        )
    try:
        async with asyncio.timeout(REPLAY_TIMEOUT):
            await replay.execute(args, kwargs)
    except NonDeterminismError as exc:
        met, expected = exc.met or "diverged", exc.expected or str(exc)
        return diverged(exc.seq, met, expected), replay.patches, None
    except TimeoutError:
        code = f"did not reach its next durable call within {REPLAY_TIMEOUT:.0f} s"
        return diverged(None, code, "the recorded outcomes"), replay.patches, None
    except Exception as exc:  # the code fails on its own history (a changed signature...)
        code = f"raised {type(exc).__name__}: {' '.join(str(exc).split())}"
        return diverged(None, code, "the recorded outcomes"), replay.patches, None
    return None, replay.patches, _cache_miss(replay, diverged)


def _cache_miss(replay: ReplayRun, made: Any) -> Divergence | None:
    """Where a run whose step names are cache keys met a key its history lacks, if it did."""
    missed, unreached = replay.journal.missed, replay.journal.unreached()
    if missed is None or not unreached:
        return None
    more = f" and {len(unreached) - 1} more entries" if len(unreached) > 1 else ""
    history = f"{journal.describe(unreached[0])}{more}, not reached: they run again"
    return made(unreached[0].seq, missed, history)  # type: ignore[no-any-return]


def _entry(record: StepRecord, serializer: Serializer) -> HistoryEntry:
    result: Any = None
    if record.result is not None:
        try:
            result = serializer.loads(record.result)
        except Exception:
            result = record.result
    return HistoryEntry(
        seq=record.seq,
        kind=record.kind,
        name=record.name,
        status=record.status,
        attempts=record.attempts,
        started_at=_dt(record.started_at),
        finished_at=_dt(record.finished_at),
        result=result,
        error=coded.unseal_json(serializer, record.error),
        key=record.key,
    )


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)
