"""Reading and starting runs: `GET /runs`, `GET /runs/{id}`, `GET /runs/{id}/history`, `POST /runs`.

Runs are shown in the shapes of `cairn runs list --json` and `cairn runs show --json`.
Starting only queues a run; workers execute it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from cairn.dashboard.api import inputs
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import NAME, Operation, Param
from cairn.dashboard.api.replies import BadRequest, Reply
from cairn.dashboard.target import Target
from cairn.errors import InvalidName, RunNotFound, UnknownWorkflow
from cairn.models import ORIGINS, UNKNOWN_ORIGIN, RunStatus, parse_origin
from cairn.names import check_name
from cairn.representation import runs as run_forms
from cairn.runtime.control import RunControl

COLUMN = "col."
FILTERS = ("status", "workflow", "version", "since", "until", "origin", "run_id_prefix", "tree")
MAX_LIMIT = 1000
# History entries per page of GET /runs/{id}/history (at most, and by default).
HISTORY_PAGE = 1000
COUNT_LIMIT = 1_000  # runs counted at most: of each status, or under filters in all (`count`)
LAST_AFTER = 2**62  # the largest `after` of a history page (a seq is a 64-bit integer)
PRIORITY = (-(2**31), 2**31 - 1)  # a run's priority, at least and at most (a 32-bit column)
START_OPTIONS = (
    "run_id",
    "queue",
    "priority",
    "dedup_key",
    "delay",
    "run_at",
    "partition",
    "allow_unknown",
)


def filters(found: dict[str, str], *, naive: tzinfo = UTC) -> dict[str, Any]:
    """`list_runs` keyword arguments from query values (`status`, ..., `col.NAME`).

    `since` and `until` without a zone are in `naive` (UTC for the API).
    """
    chosen: dict[str, Any] = {}
    try:
        if "status" in found:
            chosen["status"] = RunStatus.parse(found["status"])
        if "origin" in found:
            chosen["origin"] = parse_origin(found["origin"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    # Names follow the name rule: a bad one is 422 InvalidName, before any query.
    for key in ("workflow", "version", "run_id_prefix", "tree"):
        if key in found:
            chosen[key] = check_name(found[key], key)
    for key in ("since", "until"):
        if key in found:
            chosen[key] = moment(found[key], key, naive=naive)
    columns = {k[len(COLUMN) :]: inputs.value(v) for k, v in found.items() if k.startswith(COLUMN)}
    if any(not name for name in columns):
        raise BadRequest("a column filter is col.NAME=VALUE, with a NAME")
    for name in columns:  # a column's value is data (a NUL in it matches nothing)
        check_name(name, "column name")
    if columns:
        chosen["columns"] = columns
    return chosen


def since(text: str) -> float:
    """`since`: epoch seconds, or an ISO 8601 time (UTC unless it names a zone)."""
    return moment(text, "since")


def moment(text: str, name: str, *, naive: tzinfo = UTC) -> float:
    """A time filter: epoch seconds, or an ISO 8601 time (in `naive` unless it names a zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f"{name} must be epoch seconds or an ISO 8601 time, got {text!r}"
        ) from None
    if found.tzinfo is None:
        found = found.replace(tzinfo=naive)
    return found.timestamp()


async def list_runs(target: Target, call: Call) -> Reply:
    """`GET /runs`; with `counts=true` also how many runs each status has under the filters."""
    found = call.query((*FILTERS, "limit", "cursor", "counts"), prefixes=(COLUMN,))
    chosen = filters(found)
    limit = inputs.integer(found.get("limit"), "limit", default=50, low=1, high=MAX_LIMIT)
    cursor = found.get("cursor")
    counted = inputs.value(found.get("counts", "false"))
    if not isinstance(counted, bool):
        raise BadRequest(f"counts must be true or false, got {found['counts']!r}")

    async def page(control: RunControl) -> Any:
        try:
            listed = await control.list_runs(**chosen, limit=limit, cursor=cursor)
        except InvalidName:
            raise
        except ValueError as exc:  # a cursor not handed out by this API
            raise BadRequest(str(exc)) from None
        return listed, await count(control, chosen) if counted else None

    result, counts = await target(page)
    body: dict[str, Any] = {
        "runs": [run_forms.summary_dict(r) for r in result],
        "next_cursor": result.next_cursor,
    }
    if counts is not None:
        body["counts"] = counts.by_status
        body["counts_exact"] = counts.exact
        body["counts_lower_bounds"] = sorted(counts.lower_bounds)
    return Reply(body)


@dataclass(frozen=True, slots=True)
class Counts:
    """How many runs each status has under some filters, and which are lower bounds."""

    by_status: dict[str, int]
    lower_bounds: frozenset[str] = frozenset()  # statuses counted only up to a limit

    @property
    def exact(self) -> bool:
        """Every count is exact."""
        return not self.lower_bounds

    @property
    def total(self) -> int:
        """The runs counted (all of them when exact)."""
        return sum(self.by_status.values())


async def count(control: RunControl, chosen: dict[str, Any]) -> Counts:
    """How many runs each status has under the filters `chosen` (their status aside).

    Counting is bounded, so that the runs page costs the same over a million runs as
    over a thousand. Without filters each status is counted up to COUNT_LIMIT runs (a
    read of its range of the status index): past it its count is a lower bound, the
    others stay exact. With filters, whose matches must each be read, counting stops
    past COUNT_LIMIT runs in all; the counts are then lower bounds.
    """
    rest = {k: v for k, v in chosen.items() if k != "status"}
    limit = COUNT_LIMIT + 1
    found = await control.count_runs(**rest, limit=limit)
    by_status = {status.value: n for status, n in found.items()}
    if rest:
        capped = sum(by_status.values()) >= limit
        lower = {s for s, n in by_status.items() if n} if capped else set()
    else:
        lower = {s for s, n in by_status.items() if n >= limit}
    return Counts(by_status, frozenset(lower))


async def get_run(target: Target, call: Call) -> Reply:
    """`GET /runs/{run_id}`."""
    run_id = call.path("run_id")
    shown = await target(lambda control: run_forms.fetch(control, run_id))
    return Reply(run_forms.run_dict(shown))


async def history(target: Target, call: Call) -> Reply:
    """`GET /runs/{run_id}/history`."""
    run_id = call.path("run_id")
    found = call.query(("limit", "after"))
    limit = inputs.integer(
        found.get("limit"), "limit", default=HISTORY_PAGE, low=1, high=HISTORY_PAGE
    )
    after = inputs.integer(found.get("after"), "after", default=0, low=0, high=LAST_AFTER)

    async def read(control: RunControl) -> tuple[Any, Any, Any]:
        history = await control.history(run_id, after=after, limit=limit)
        return history, await control.attempts(run_id), await control.executing(run_id)

    entries, attempts, executing = await target(read)
    return Reply(
        {
            "run_id": run_id,
            "history": [run_forms.entry_dict(entry) for entry in entries],
            "attempts": attempts,
            "executions": [run_forms.execution_dict(e) for e in entries.executions],
            "executing": executing,
            "next_after": entries.next_after,
        }
    )


async def start(target: Target, call: Call) -> Reply:
    """`POST /runs`: queue a run; 201, or 200 when `run_id` names an existing run.

    A workflow name nobody knows (UnknownWorkflow) and arguments that do not fit its
    signature (InvalidArguments) are 422; arguments are converted to the annotated
    types when this process imports the workflow.
    """
    body = await call.fields(("workflow", "args", "kwargs", *START_OPTIONS), required=("workflow",))
    workflow = inputs.typed(body["workflow"], str, "workflow")
    if not workflow:
        raise BadRequest("workflow must not be empty")
    args = inputs.typed(body.get("args", []), list, "args")
    kwargs = inputs.typed(body.get("kwargs", {}), dict, "kwargs")
    clash = sorted(set(kwargs) & {*START_OPTIONS, "parent_id"})
    if clash:
        raise BadRequest(
            f"kwargs key {clash[0]!r} is also a start option; give the option at the top level"
        )
    options: dict[str, Any] = {}
    for key in ("run_id", "queue", "dedup_key", "partition"):
        if body.get(key) is not None:
            options[key] = inputs.typed(body[key], str, key)
    if body.get("priority") is not None:
        priority = inputs.typed(body["priority"], int, "priority")
        low, high = PRIORITY
        if not low <= priority <= high:
            raise BadRequest(f"priority must be between {low} and {high}, got {priority}")
        options["priority"] = priority
    if body.get("delay") is not None:
        options["delay"] = inputs.typed(body["delay"], (str, int, float), "delay")
    if body.get("run_at") is not None:
        options["run_at"] = _moment(inputs.typed(body["run_at"], str, "run_at"))
    if body.get("allow_unknown") is not None:
        options["allow_unknown"] = inputs.typed(body["allow_unknown"], bool, "allow_unknown")

    async def go(control: RunControl) -> tuple[bool, Any]:
        existed = False
        if "run_id" in options:
            try:
                await control.record(options["run_id"])
                existed = True
            except RunNotFound:
                pass
        try:
            handle = await control.start(workflow, *args, **options, **kwargs)
        except UnknownWorkflow as exc:
            raise exc.told('set "allow_unknown": true in the request body') from None
        return existed, await control.describe(handle.run_id)

    existed, run = await target(go)
    return Reply(run_forms.summary_dict(run), 200 if existed else 201)


def _moment(text: str) -> datetime:
    """`run_at`: an ISO 8601 date and time (UTC unless it names its offset)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"run_at must be an ISO 8601 date and time, got {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# A time filter: epoch seconds, or an ISO 8601 date and time.
MOMENT = {"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"}]}

# A run id may hold `/` (a child run's does): the rest of the path, up to an action's suffix.
RUN = "/runs/{run_id:path}"

OPERATIONS = (
    Operation(
        "GET",
        "/runs",
        list_runs,
        "List runs, newest first, filtered and paged",
        query=(
            Param(
                "status",
                "only runs in this status (PENDING, RUNNING, ..., FAILED; any case)",
                {"enum": [status.value for status in RunStatus]},
            ),
            Param("workflow", "only runs of this workflow name", NAME),
            Param("version", "only runs started under this workflow version", NAME),
            Param("since", "only runs created since: epoch seconds or ISO 8601 (UTC)", MOMENT),
            Param("until", "only runs created before: epoch seconds or ISO 8601 (UTC)", MOMENT),
            Param(
                "origin",
                "only runs started this way: api, schedule, trigger, parent, continue, "
                "restart, fork, or unknown (runs from before cairn recorded it)",
                {"enum": [*ORIGINS, UNKNOWN_ORIGIN]},
            ),
            Param("run_id_prefix", "only runs whose id starts with this text", NAME),
            Param(
                "tree",
                "only this run and its descendants (child runs, theirs, ... 16 "
                "generations down at most)",
                NAME,
            ),
            Param("col.NAME", "only runs whose column NAME equals the value (JSON or text)"),
            Param(
                "limit",
                f"at most this many runs (50; 1 to {MAX_LIMIT})",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            ),
            Param("cursor", "the next_cursor of the previous page"),
            Param(
                "counts",
                "true: add `counts`, the runs of each status under the other filters, and "
                "`counts_exact` and `counts_lower_bounds` (counting stops past 1,000 runs "
                "of a status, or past 1,000 runs in all under filters: the statuses whose "
                "count is then a lower bound)",
                {"type": "boolean"},
            ),
        ),
        errors=(422,),
    ),
    Operation(
        "POST",
        "/runs",
        start,
        "Start (queue) a run of a workflow by name",
        ok=201,
        also=((200, "`run_id` names a run that exists already: that run, nothing started"),),
        body={
            "type": "object",
            "required": ["workflow"],
            "properties": {
                "workflow": NAME,
                "args": {"type": "array"},
                "kwargs": {"type": "object"},
                "run_id": NAME,
                "queue": NAME,
                "priority": {
                    "type": "integer",
                    "minimum": PRIORITY[0],
                    "maximum": PRIORITY[1],
                    "description": "lower runs are claimed first (0)",
                },
                "dedup_key": NAME,
                "delay": {
                    "type": ["string", "number"],
                    "description": 'hold the run back this long: seconds, or a duration ("90s")',
                },
                "run_at": {
                    "type": "string",
                    "format": "date-time",
                    "description": "hold the run back until then (UTC unless it names its offset)",
                },
                "partition": NAME,
                "allow_unknown": {"type": "boolean"},
            },
            "not": {"required": ["delay", "run_at"]},  # one or the other
            "additionalProperties": False,
        },
        errors=(409, 422),
    ),
    # Before `GET /runs/{run_id}`, which would take `x/history` as a run id.
    Operation(
        "GET",
        f"{RUN}/history",
        history,
        "A run's step history of every execution, its failed, interrupted and cancelled "
        "attempts, and the steps executing now; a long history in pages (`next_after`: "
        "the `after` of the next page, null on the last)",
        query=(
            Param(
                "limit",
                f"at most this many history entries ({HISTORY_PAGE}; 1 to {HISTORY_PAGE})",
                {"type": "integer", "minimum": 1, "maximum": HISTORY_PAGE},
            ),
            Param(
                "after",
                "entries after this history entry (seq; 0)",
                {"type": "integer", "minimum": 0, "maximum": LAST_AFTER},
            ),
        ),
        errors=(404, 422),
    ),
    Operation("GET", RUN, get_run, "One run's facts", errors=(404, 422)),
)
