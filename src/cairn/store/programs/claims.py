"""Programs of claims (see `programs` for what a program is).

A claim takes due, queued and orphaned runs in one transaction, honouring each queue's
limits (`queues.QueueGate`) and ending runs recovered too often (PoisonRun).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs import orphans
from cairn.store.programs.base import Program, Sql, all_rows, operation
from cairn.store.programs.queues import Entry, QueueGate
from cairn.store.programs.runs import after_finish
from cairn.store.records import Claimed

# Whether a claim may judge owners by old heartbeats: a flag, or a judgement (see `claim`).
Stale = bool | Callable[[], bool]


@operation
def claim(
    worker_id: str,
    limit: int,
    *,
    now: float,
    stale: Stale,
    queues: list[str] | None = None,
    workflows: list[str] | None = None,
    versions: dict[str, str] | None = None,
    orphans_first: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
) -> Program[Claimed]:
    """Atomically take up to `limit` runs to execute (only of the run ids `only`, if given).

    Never the run ids in `skip` (runs this worker handed back for a key it lacks).

    Only runs of `workflows` are taken when it is given (a worker takes only what its code
    can execute). A queued run without a version, or without history yet, gets
    `versions[workflow]` (the version of the code that first executes it).

    Candidates are parked runs now due, PENDING runs that are due, and RUNNING runs whose
    owner is dead (recoveries): it has no worker row or was expired, or (only with
    `stale`) its heartbeat is older than its own lease by the database's clock (a callable
    `stale` is asked as each try of the transaction starts: one retried after a lost
    connection judges again, after that trouble, not before it). Each kind
    alike is taken only if it is of `queues` (when given) and its queue's limits let it in
    (see programs/queues.py LIMITS: which limit holds which kind). Orphans come after
    pending runs, unless `orphans_first` (a worker asks that now and then, so that a
    backlog of new runs never keeps a dead worker's runs waiting). Claimed runs become
    RUNNING, owned by `worker_id`, with their fence bumped; `attempt` grows for a start or
    recovery, not for a wake-up. A recovered run past its max_recoveries is ended FAILED
    instead and reported in `poisoned` (run id -> workflow), unless its parent or a child
    is locked by another transaction (then a later claim ends it: `orphans.relatives_held`
    says why). Either way, each step the dead owner's last heartbeat listed in flight for
    the run (under its fence) is recorded as an attempt with outcome "interrupted", unless
    its outcome or that attempt's failure is already recorded. A run held back by a limit
    gets `waiting_for` naming it. A run is never handed to two workers, and an orphan's
    owner is judged again once its run is locked (`orphans.still_orphaned`): a heartbeat
    of the owner that commits meanwhile either keeps its runs, or its fence check sees
    them taken. (PostgreSQL first probes for candidates, see PostgresStore.)
    """
    if limit <= 0 or workflows == [] or queues == [] or only == []:
        return Claimed([], {})  # nothing could be taken
    return (
        yield from claim_runs(
            worker_id, limit, now, stale, queues, workflows, versions, orphans_first, only, skip
        )
    )


def claim_runs(
    worker_id: str,
    limit: int,
    now: float,
    stale: Stale,
    queues: list[str] | None = None,
    workflows: list[str] | None = None,
    versions: dict[str, str] | None = None,
    orphans_first: bool = False,
    only: list[str] | None = None,
    skip: list[str] | None = None,
) -> Program[Claimed]:
    """Take due runs, then pending and orphaned ones (see `claim`).

    `only`: of these run ids alone (a transport's message names the run to take).

    Every candidate, however it came to be claimable, is taken only if the worker serves
    its queue (`queues`) and its queue's limits let it in (`queues.LIMITS`, by entry); a
    run held back gets `waiting_for` saying which limit holds it.
    """
    judged = stale() if callable(stale) else stale  # asked as each try starts (see claim)
    pick = _Pick(worker_id, now, queues, workflows, only, skip)
    reads = _candidate_reads(pick, judged)
    due_at: dict[str, float] = {}
    woken = yield from pick.take("wake", *reads["wake"], limit)
    claimed = [run_id for run_id, _ in woken]
    due_at.update(woken)
    started: list[str] = []
    poisoned: dict[str, str] = {}
    if orphans_first:
        claimed += yield from _claim_orphans(pick, reads, judged, limit - len(claimed), poisoned)
    if len(claimed) < limit:
        pending = yield from pick.take("start", *reads["start"], limit - len(claimed))
        started = [run_id for run_id, _ in pending]
        claimed += started
        due_at.update(pending)
        yield from _set_versions(started, pick.workflow_of, versions or {})
    if not orphans_first:
        claimed += yield from _claim_orphans(pick, reads, judged, limit - len(claimed), poisoned)
    rows: dict[str, Any] = {}
    for chunk in _chunks(claimed):
        for row in (yield all_rows(_sql.for_runs(_sql.SELECT_RUN, len(chunk)), chunk)):
            rows[str(row[0])] = row
    runs = [_sql.run_from_row(rows[run_id]) for run_id in claimed]
    if started:
        # A start claimed before (handed back, retried) was due long before this claim:
        # like a recovery, it has no claim lag (its first claim's was measured then).
        fences = {run.run_id: run.fence for run in runs}
        for run_id in started:
            if fences[run_id] > 1:
                del due_at[run_id]
    return Claimed(runs, poisoned, due_at)


def idle_probe(
    worker_id: str,
    now: float,
    stale: Stale,
    queues: list[str] | None = None,
    workflows: list[str] | None = None,
    only: list[str] | None = None,
    skip: list[str] | None = None,
) -> list[Sql]:
    """The reads of every run `claim_runs` could take (its arguments, read-only).

    When none finds a row, `claim_runs` with the same arguments takes nothing and writes
    nothing: it makes exactly these reads and returns an empty Claimed. PostgreSQL asks
    them first in one round trip (`EXISTS`), so an idle claim locks nothing.
    tests/unit/test_claims_probe.py holds `claim_runs` to this.
    """
    pick = _Pick(worker_id, now, queues, workflows, only, skip)
    return [
        pick.candidates(text, params, 1, [])
        for text, params in _candidate_reads(pick, stale() if callable(stale) else stale).values()
    ]


def _candidate_reads(pick: _Pick, stale: bool) -> dict[Entry, tuple[str, tuple[Any, ...]]]:
    """The candidate read of each way in (its SQL and parameters, before `_Pick.candidates`).

    Both `claim_runs` and `idle_probe` read candidates from here, and nowhere else.
    """
    return {
        "wake": (_sql.SELECT_WOKEN, (pick.now,)),
        "start": (_sql.SELECT_PENDING, (pick.now,)),
        "recover": (
            _sql.SELECT_ORPHANED if stale else _sql.SELECT_ORPHANED_DEAD,
            (pick.worker_id,),
        ),
    }


# Increments of (attempt, recoveries) by entry: a waking run is the same attempt going on.
_INCREMENTS: dict[Entry, tuple[int, int]] = {"start": (1, 0), "wake": (0, 0), "recover": (1, 1)}
# Candidates read per place to fill, by entry: pending runs are over-fetched, as some may
# be held back by their queue; parked and orphaned ones are read as many as there is room.
_FETCH: dict[Entry, int] = {"start": 4, "wake": 1, "recover": 1}


class _Pick:
    """The candidates of one claim: who claims, what it serves, and one queue gate."""

    def __init__(
        self,
        worker_id: str,
        now: float,
        queues: list[str] | None,
        workflows: list[str] | None,
        only: list[str] | None,
        skip: list[str] | None = None,
    ) -> None:
        self.worker_id, self.now = worker_id, now
        self.queues, self.workflows, self.only = queues, workflows, only
        self.skip = list(skip or ())
        self.gate = QueueGate(worker_id, now)
        self.workflow_of: dict[str, str] = {}

    def candidates(self, text: str, params: tuple[Any, ...], want: int, left_out: list[str]) -> Sql:
        """Up to `want` rows of `text` this worker may take, locked.

        Of its run ids (`only`), workflows and queues, without the queues in `left_out`
        (full for this claim).
        """
        narrowed = _only(
            _sql.restrict(
                _sql.restrict(
                    _sql.leave_out(_sql.leave_out(text, "run_id", self.skip), "queue", left_out),
                    "queue",
                    self.queues,
                ),
                "workflow",
                self.workflows,
            ),
            self.only,
        )
        known = (*(self.only or ()), *(self.workflows or ()), *(self.queues or ()))
        return all_rows(narrowed, (*known, *left_out, *self.skip, *params, want), lock=True)

    def take(
        self, entry: Entry, text: str, params: tuple[Any, ...], room: int
    ) -> Program[list[tuple[str, float]]]:
        """Claim up to `room` runs of `text`'s candidates by `entry`, in candidate order.

        Each as (run id, when it became due). Rows in SELECT_PENDING's columns. A read
        that holds back a whole queue reads again without it, so that a full queue's runs
        do not keep the others from the room left.
        """
        taken: list[tuple[str, float]] = []
        left_out: list[str] = []
        while room > 0:
            want = room * _FETCH[entry]
            rows = yield self.candidates(text, params, want, left_out)
            due = {str(row[0]): float(row[6]) for row in rows}
            for row in rows:
                self.workflow_of[str(row[0])] = str(row[5])
            took = yield from self.admit(entry, [row[:5] for row in rows], room)
            taken += [(run_id, due[run_id]) for run_id in took]
            room -= len(took)
            full = sorted(self.gate.full(entry) - set(left_out))
            if len(rows) < want or not full:
                break
            left_out += full
        return taken

    def admit(
        self, entry: Entry, candidates: Sequence[Sequence[Any]], room: int
    ) -> Program[list[str]]:
        """Claim up to `room` candidates in order; the ids claimed.

        Each candidate is (run id, status, queue, partition, waiting_for). Runs on a queue
        pass its gate one by one; runs on none, which no limit holds back, are claimed
        together (one statement per status).
        """
        # (run id, status, whether claimed or None for a run on no queue)
        chosen: list[tuple[str, str, bool | None]] = []
        for run_id, status, queue, partition, waiting_for in candidates:
            if room <= 0:
                break
            run_id, status = str(run_id), str(status)
            if queue is None:
                chosen.append((run_id, status, None))
                room -= 1
                continue
            held = yield from self.gate.held(queue, partition, entry)
            if held is not None:
                if held != waiting_for:
                    yield Sql(_sql.SET_WAITING_FOR, (held, run_id))
                continue
            claim = (*self._claiming(entry), run_id, status)
            one = bool((yield Sql(_sql.CLAIM_ONE, claim)))
            chosen.append((run_id, status, one))
            if one:
                room -= 1
                self.gate.took(queue, partition, entry)
        free: dict[str, list[str]] = {}
        for run_id, status, claimed in chosen:
            if claimed is None:
                free.setdefault(status, []).append(run_id)
        took: set[str] = set()
        for status, run_ids in free.items():
            took |= yield from self._claim_all(run_ids, status, entry)
        return [r for r, _, one in chosen if one or (one is None and r in took)]

    def _claiming(self, entry: Entry) -> tuple[Any, ...]:
        """CLAIM_ONE's first params: owner, increments, now x3, counted start, woken.

        The start is the one the queue's rate counts; woken says the claim wakes the run
        (a hand-back puts such a run back as the claim found it).
        """
        n = self.now  # a wake-up or a recovery is no start the rate counts
        counted = n if entry == "start" else None
        return (self.worker_id, *_INCREMENTS[entry], n, n, n, counted, int(entry == "wake"))

    def _claim_all(self, run_ids: list[str], status: str, entry: Entry) -> Program[set[str]]:
        """Claim `run_ids` (of `status`, locked by this transaction); the ids claimed."""
        took: set[str] = set()
        for chunk in _chunks(run_ids):
            params = (*self._claiming(entry), *chunk, status)
            rows = yield all_rows(_sql.claim_many(len(chunk)), params)
            took.update(str(row[0]) for row in rows)
        return took


# Ids per statement when claiming or reading many runs at once (well under both databases'
# limits on parameters).
_CHUNK = 500


def _chunks(run_ids: list[str]) -> list[list[str]]:
    return [run_ids[i : i + _CHUNK] for i in range(0, len(run_ids), _CHUNK)]


def _set_versions(
    run_ids: list[str], workflow_of: dict[str, str], versions: dict[str, str]
) -> Program[None]:
    """Give runs without a version or history the version of their workflow's code here."""
    by_version: dict[str, list[str]] = {}
    for run_id in run_ids:
        version = versions.get(workflow_of[run_id])
        if version is not None:
            by_version.setdefault(version, []).append(run_id)
    for version, ids in by_version.items():
        for chunk in _chunks(ids):
            yield Sql(_sql.for_runs(_sql.SET_VERSION, len(chunk)), (version, *chunk))


def _claim_orphans(
    pick: _Pick,
    reads: dict[Entry, tuple[str, tuple[Any, ...]]],
    stale: bool,
    room: int,
    poisoned: dict[str, str],
) -> Program[list[str]]:
    """Take RUNNING runs whose owner is dead, up to `room` (see claim_runs); the ids taken.

    `stale`: whether an owner's old heartbeat makes it dead (`reads` read it so).

    A run recovered too often is ended instead (PoisonRun) and put in `poisoned`.
    """
    claimed: list[str] = []
    left_out: list[str] = []
    while room > 0:
        text, params = reads["recover"]
        read = yield pick.candidates(text, params, room, left_out)
        dead = yield from orphans.still_orphaned(read, stale=stale)
        survivors = []
        for row in dead:
            run_id, recoveries, max_recoveries, workflow, owner, fence, execution = row[:7]
            if recoveries >= max_recoveries:
                if not (yield from orphans.relatives_held(run_id)):
                    continue  # a relative is locked (a heartbeat?): a later claim ends it
                error = _sql.poison_error(run_id, recoveries)
                yield Sql(_sql.POISON_ONE, (error, pick.now, pick.now, run_id))
                yield from after_finish(run_id, RunStatus.FAILED, None, error, pick.now)
                poisoned[run_id] = str(workflow)
                yield from orphans.record_interrupted(
                    run_id, owner, int(fence), int(execution), pick.now
                )
            else:
                survivors.append((run_id, RunStatus.RUNNING, *row[7:10]))
        took = yield from pick.admit("recover", survivors, room)
        by_id = {str(row[0]): row for row in dead}
        for run_id in took:
            _, _, _, _, owner, fence, execution = by_id[run_id][:7]
            yield from orphans.record_interrupted(
                run_id, owner, int(fence), int(execution), pick.now
            )
        claimed += took
        room -= len(took)
        full = sorted(pick.gate.full("recover") - set(left_out))
        if len(read) < room + len(took) or not full:
            break
        left_out += full
    return claimed


def _only(sql: str, run_ids: list[str] | None) -> str:
    """`sql` narrowed to `run_ids` (their placeholders come first; None: unchanged)."""
    if run_ids is None:
        return sql
    marks = ", ".join("?" * len(run_ids))
    return sql.replace("WHERE ", f"WHERE run_id IN ({marks}) AND ", 1)
