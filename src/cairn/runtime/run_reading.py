"""The read side of RunControl: a run's record, summary, history and attempts, and lists."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cairn import blobs
from cairn.authoring.definitions import WorkflowDef, definition_of
from cairn.clock import Clock
from cairn.codecs import coded
from cairn.errors import InvalidValue, RunNotFound
from cairn.models import History, RunPage, RunStatus, RunSummary, parse_origin
from cairn.names import check_name, findable
from cairn.runtime import blocking
from cairn.runtime import history as run_history
from cairn.serialization import Serializer
from cairn.store.programs import journal, step_tasks
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import Store
from cairn.store.records import RunQuery, RunRecord


class RunReader:
    """Inspect runs through a Store: the queries RunControl (runtime/control.py) serves."""

    def __init__(self, store: Store, *, clock: Clock, serializer: Serializer) -> None:
        self.store = store
        self.clock = clock
        self.serializer = serializer

    async def record(self, run_id: str) -> RunRecord:
        """The stored run; RunNotFound if unknown."""
        storable(run_id)
        run = await self.store.read(run_ops.get_run(run_id))
        if run is None:
            raise RunNotFound(run_id)
        return run

    async def describe(self, run_id: str) -> RunSummary:
        """The run's summary (status, version, chain links, what it waits for)."""
        return summary(await self.record(run_id), now=self.clock.now(), serializer=self.serializer)

    async def status(self, run_id: str) -> RunStatus:
        """The run's status."""
        return RunStatus((await self.record(run_id)).status)

    async def list_runs(
        self,
        status: RunStatus | str | None = None,
        workflow: WorkflowDef[Any, Any] | str | None = None,
        columns: dict[str, Any] | None = None,
        since: datetime | float | None = None,
        limit: int = 100,
        cursor: str | None = None,
        version: str | None = None,
        *,
        until: datetime | float | None = None,
        origin: str | None = None,
        run_id_prefix: str | None = None,
        tree: str | None = None,
    ) -> RunPage:
        """A page of runs, newest first.

        `since` / `until` bound the creation time (`until` excluded), `origin` is what
        started the runs (one of `models.ORIGINS`, or "unknown" for runs from before
        cairn recorded it), `run_id_prefix` keeps the runs whose id starts with it,
        `tree` the run of that id and its descendants (children, theirs, ... 16
        generations down at most).
        """
        if not isinstance(limit, int) or limit < 1:
            raise InvalidValue(f"limit must be a positive integer, got {limit!r}")
        query = _query(
            status=status,
            workflow=workflow,
            columns=columns,
            since=since,
            until=until,
            version=version,
            origin=origin,
            run_id_prefix=run_id_prefix,
            tree=tree,
            limit=limit + 1,
            cursor=parse_cursor(cursor),
        )
        rows = await self.store.read(run_ops.list_runs(query))
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = f"{rows[-1].created_at!r}|{rows[-1].run_id}" if more else None
        now = self.clock.now()
        return RunPage(
            [summary(row, now=now, serializer=self.serializer) for row in rows], next_cursor
        )

    async def count_runs(
        self,
        workflow: WorkflowDef[Any, Any] | str | None = None,
        columns: dict[str, Any] | None = None,
        since: datetime | float | None = None,
        version: str | None = None,
        *,
        until: datetime | float | None = None,
        origin: str | None = None,
        run_id_prefix: str | None = None,
        tree: str | None = None,
        limit: int | None = None,
    ) -> dict[RunStatus, int]:
        """How many runs `list_runs` with these filters finds in each status (one read).

        Every status is a key, 0 when no run has it. With `limit` and no filter, each
        status is counted up to `limit` (a count of `limit` is a lower bound); with
        filters, at most `limit` runs are counted in all: when the counts add up to
        `limit`, each is a lower bound. Either way the read is bounded by `limit`.
        """
        query = _query(
            workflow=workflow,
            columns=columns,
            since=since,
            until=until,
            version=version,
            origin=origin,
            run_id_prefix=run_id_prefix,
            tree=tree,
        )
        found = await self.store.read(run_ops.count_runs(query, limit))
        return {status: found.get(status.value, 0) for status in RunStatus}

    async def history(self, run_id: str, *, after: int = 0, limit: int | None = None) -> History:
        """Every durable operation of the run, of every execution, in the order they happened.

        Entries a retry ran again stay, marked `superseded`; `History.executions` says
        who began each execution and when (see runtime/history.py). With `limit`, one
        page of at most `limit` entries after history entry `after` (its seq), and
        `History.next_after` the `after` of the next page (None on the last).
        """
        if limit is not None and limit < 1:
            raise InvalidValue(f"limit must be a positive integer, got {limit!r}")
        if after < 0:
            raise InvalidValue(f"after must be a history entry number (0 or more), got {after!r}")
        run = await self.record(run_id)
        try:
            payload = self.serializer.loads(run.args)
            args, kwargs = tuple(payload.get("args", ())), dict(payload.get("kwargs", {}))
        except Exception:  # an argument type that cannot be restored here
            args, kwargs = (), {}
        return await run_history.history(
            self.store,
            run,
            self._stored,
            args,
            kwargs,
            now=self.clock.now(),
            serializer=self.serializer,
            after_seq=after,
            limit=limit,
        )

    def _stored(self, text: str | None) -> Any:
        """A stored value for people to read: its text when it cannot be restored here."""
        if text is None:
            return None
        if (offloaded := blobs.shown(self.serializer, text)) is not None:
            return offloaded
        try:
            return coded.shown_value(self.serializer, text)
        except Exception:  # a type this process cannot import, say
            return text

    async def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """Every failed or interrupted step attempt of the run, by execution.

        Each names its `execution` and `outcome` ("failed", or "interrupted" with the
        `worker` that ran it: a local step's, or a step queue's claim whose worker let
        its lease run out). `started_at` and `duration` (seconds to `failed_at`) are
        None for attempts recorded before cairn kept when each began.
        """
        found = await self.store.read(journal.load_attempts(run_id))
        lost = run_history.queued_interruptions(
            run_id, await self.store.read(step_tasks.of_run(run_id))
        )
        if lost:  # in the order they ended, within each execution
            found = sorted([*found, *lost], key=lambda a: (a.execution, a.failed_at))
        return [run_history.attempt_dict(a, self.serializer) for a in found]

    async def executing(self, run_id: str) -> list[dict[str, Any]]:
        """The step attempts executing for the run now (see runtime/history.executing)."""
        return await run_history.executing(self.store, await self.record(run_id))

    async def copies(self, run_id: str) -> list[dict[str, Any]]:
        """The runs restarted or forked from this one, oldest first."""
        await self.record(run_id)
        return await run_history.copies(self.store, run_id)


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def parsed_json(text: str | None) -> Any:
    """A stored JSON column read back; None stays None."""
    return None if text is None else json.loads(text)


def storable(run_id: str) -> None:
    """RunNotFound for an id no run can have (a NUL, say), before the store refuses it.

    InvalidName if `run_id` is not a string at all.
    """
    if not findable(run_id, "run id"):
        raise RunNotFound(run_id)


def summary(run: RunRecord, *, now: float, serializer: Serializer) -> RunSummary:
    """The public summary of a stored run (`now` dates what it waits for).

    Its error is decrypted with `serializer`'s keys, or "encrypted (k1)" without them.
    """
    return RunSummary(
        run_id=run.run_id,
        workflow=run.workflow,
        status=RunStatus(run.status),
        created_at=datetime.fromtimestamp(run.created_at, UTC),
        updated_at=datetime.fromtimestamp(run.updated_at, UTC),
        columns=parsed_json(run.columns) or {},
        progress=parsed_json(run.progress),
        parent_id=run.parent_id,
        queue=run.queue,
        error=coded.shown_error(serializer, run.error),
        version=run.version,
        waiting_for=blocking.reason(run, now=now),
        continued_from=run.continued_from,
        continued_to=run.continued_to,
        started_at=_dt(run.started_at),
        execution=run.execution,
        restarted_from=run.restarted_from,
        forked_from=run.forked_from,
        forked_from_seq=run.forked_from_seq,
        origin=run.origin,
        futile_wakes=run.futile_wakes,
    )


def _workflow_name(workflow: Any) -> str | None:
    """A filter's workflow: a name, or the name of a definition (a @cairn.workflow...)."""
    found = definition_of(workflow)
    if found is not None:
        return found.name
    return None if workflow is None else check_name(workflow, "workflow")


def _query(
    *,
    status: RunStatus | str | None = None,
    workflow: WorkflowDef[Any, Any] | str | None = None,
    columns: dict[str, Any] | None = None,
    since: datetime | float | None = None,
    until: datetime | float | None = None,
    version: str | None = None,
    origin: str | None = None,
    run_id_prefix: str | None = None,
    tree: str | None = None,
    limit: int = 100,
    cursor: tuple[float, str] | None = None,
) -> RunQuery:
    """The store's query for `list_runs` / `count_runs` filters; ValueError names a bad one."""
    # Names are checked (a NUL would make PostgreSQL refuse the query); a column's value
    # is data, JSON text in which a NUL is escaped, so a value no run has finds nothing.
    if run_id_prefix is not None:
        check_name(run_id_prefix, "run id prefix")
    if version is not None:
        check_name(version, "version")
    return RunQuery(
        status=None if status is None else RunStatus.parse(status).value,
        workflow=_workflow_name(workflow),
        columns={
            check_name(k, "column name"): json.dumps(v, sort_keys=True)
            for k, v in (columns or {}).items()
        },
        since=since.timestamp() if isinstance(since, datetime) else since,
        until=until.timestamp() if isinstance(until, datetime) else until,
        version=version,
        origin=None if origin is None else parse_origin(origin),
        run_id_prefix=run_id_prefix,
        tree=tree,
        limit=limit,
        cursor=cursor,
    )


def parse_cursor(cursor: str | None) -> tuple[float, str] | None:
    """`(created_at, run_id)` of a page's cursor; InvalidValue when it is not one."""
    if cursor is None:
        return None
    created, sep, run_id = cursor.partition("|") if isinstance(cursor, str) else ("", "", "")
    try:
        if not sep or not findable(run_id, "cursor"):
            raise ValueError
        return float(created), run_id
    except ValueError:
        raise InvalidValue(f"invalid cursor {cursor!r} (pass back RunPage.next_cursor)") from None
