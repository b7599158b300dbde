"""Acting on many runs at once: `POST /runs/cancel` and `POST /runs/retry`.

The runs are named by `ids`, or chosen by a `filter` (at most `limit` of them, newest
first). Each run gets its own result, so one finished run does not fail the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from cairn.dashboard.api import actions, inputs, runs
from cairn.dashboard.api.actions import Act
from cairn.dashboard.api.inputs import Call
from cairn.dashboard.api.operations import NAME, Handler, Operation
from cairn.dashboard.api.replies import BadRequest, Reply, describe
from cairn.dashboard.target import Target
from cairn.models import RunStatus
from cairn.names import check_name
from cairn.runtime.control import RunControl

MAX_RUNS = 1000
_PAGE = 200
_CRITERIA = ("status", "workflow", "version", "since", "columns")


def criteria(found: Any) -> dict[str, Any]:
    """`list_runs` keyword arguments from a body's `filter` object."""
    found = inputs.typed(found, dict, "filter")
    unknown = sorted(set(found) - set(_CRITERIA))
    if unknown:
        raise BadRequest(f"unknown filter {unknown[0]!r} (known: {', '.join(_CRITERIA)})")
    if not found:
        # An empty filter would act on every run in the database.
        raise BadRequest(f"filter must name at least one of {', '.join(_CRITERIA)}")
    chosen: dict[str, Any] = {}
    if "status" in found:
        try:
            chosen["status"] = RunStatus.parse(inputs.typed(found["status"], str, "filter.status"))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    for key in ("workflow", "version"):
        if key in found:
            text = inputs.typed(found[key], str, f"filter.{key}")
            # A name as stored (PostgreSQL refuses a NUL even in a filter): 422 InvalidName.
            chosen[key] = check_name(text, f"filter.{key}")
    if "since" in found:
        since = inputs.typed(found["since"], (str, int, float), "filter.since")
        chosen["since"] = runs.since(str(since))
    if "columns" in found:
        columns = inputs.typed(found["columns"], dict, "filter.columns")
        if not columns:
            raise BadRequest("filter.columns must name at least one column")
        chosen["columns"] = columns
    return chosen


async def select(control: RunControl, chosen: dict[str, Any], limit: int) -> tuple[list[str], bool]:
    """Ids of the runs the filter matches, newest first, and whether more match."""
    ids: list[str] = []
    cursor = None
    while len(ids) < limit:
        page = await control.list_runs(**chosen, limit=min(_PAGE, limit - len(ids)), cursor=cursor)
        ids += [run.run_id for run in page]
        cursor = page.next_cursor
        if cursor is None:
            return ids, False
    return ids, True


def _bulk(verb: str, act: Callable[..., Awaitable[Any]], *, recorded: bool = False) -> Handler:
    """The handler of `POST /runs/VERB`; a `recorded` verb takes `by` (see actions.who)."""
    where = f"POST /runs/{verb}"

    async def handle(target: Target, call: Call) -> Reply:
        body = await call.fields(("ids", "filter", "limit", *(("by",) if recorded else ())))
        each: Act = partial(act, by=actions.who(body)) if recorded else act
        if ("ids" in body) == ("filter" in body):
            raise BadRequest("request body needs exactly one of 'ids' and 'filter'")
        if "ids" in body:
            if "limit" in body:
                raise BadRequest("'limit' goes with 'filter', not with 'ids'")
            ids = inputs.typed(body["ids"], list, "ids")
            if len(ids) > MAX_RUNS:
                raise BadRequest(f"at most {MAX_RUNS} ids at once, got {len(ids)}")
            for run_id in ids:
                inputs.typed(run_id, str, "every id")
            chosen = None
        else:
            chosen = criteria(body["filter"])
        limit = inputs.typed(body.get("limit", MAX_RUNS), int, "limit")
        if not 1 <= limit <= MAX_RUNS:
            raise BadRequest(f"limit must be between 1 and {MAX_RUNS}, got {limit}")

        async def go(control: RunControl) -> dict[str, Any]:
            more = False
            targets = list(dict.fromkeys(ids)) if chosen is None else []
            if chosen is not None:
                targets, more = await select(control, chosen, limit)
            results = []
            for run_id in targets:
                try:
                    done = await each(control, run_id)
                except Exception as exc:
                    status, name, message = describe(exc, where=where)
                    if status >= 500:
                        raise  # the database, not this run: the whole request failed
                    results.append(
                        {"run_id": run_id, "ok": False, "error": name, "message": message}
                    )
                else:
                    results.append(
                        {
                            "run_id": run_id,
                            "ok": True,
                            "status": done["status"],
                            "requested": done["requested"],
                        }
                    )
            return {"results": results, "more": more}

        return Reply(await target(go))

    return handle


_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ids": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_RUNS},
        "filter": {
            "type": "object",
            "properties": {
                "status": {"enum": [status.value for status in RunStatus]},
                "workflow": NAME,
                "version": NAME,
                "since": runs.MOMENT,
                "columns": {"type": "object", "minProperties": 1},
            },
            "additionalProperties": False,
            "minProperties": 1,
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS},
    },
    # Runs named by `ids`, or chosen by `filter` (`limit` goes with a filter only).
    "oneOf": [
        {
            "required": ["ids"],
            "not": {"anyOf": [{"required": ["filter"]}, {"required": ["limit"]}]},
        },
        {"required": ["filter"], "not": {"required": ["ids"]}},
    ],
    "additionalProperties": False,
}
_RETRY_BODY = {**_BODY, "properties": {**_BODY["properties"], **actions.BY}}

OPERATIONS = (
    Operation(
        "POST",
        "/runs/cancel",
        _bulk("cancel", actions.cancel_run),
        "Cancel many runs, by ids or by filter; a result per run",
        body=_BODY,
        errors=(422,),  # a filter's name that breaks the name rule
    ),
    Operation(
        "POST",
        "/runs/retry",
        _bulk("retry", actions.retry_run, recorded=True),
        "Retry many FAILED runs, by ids or by filter; a result per run",
        body=_RETRY_BODY,
        errors=(422,),
    ),
)
