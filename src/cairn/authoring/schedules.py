"""`cairn.schedule`: a schedule declared in code, checked (`define`) and registered.

What a schedule is and when its ticks fall is authoring/schedule_ticks.py (`ScheduleDef`);
firing ticks, overlap and storage live in the runtime and the store, not here.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cairn import durations
from cairn.authoring import registry
from cairn.authoring.definitions import definition_of
from cairn.authoring.schedule_ticks import MACROS, ScheduleDef, cron_after
from cairn.errors import InvalidArguments, InvalidValue, TransientWorkflow
from cairn.names import check_name

OVERLAPS = ("skip", "buffer_one", "allow", "cancel_other")
MIN_EVERY = 1.0


def _check_cron(expr: Any, what: str) -> str:
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidValue(
            f"invalid cron expression {expr!r} for {what} (5 fields, e.g. '0 9 * * *')"
        )
    text = " ".join(expr.split())
    expanded = MACROS.get(text, text)
    if len(expanded.split()) != 5:
        raise InvalidValue(
            f"invalid cron expression {expr!r} for {what}: need 5 fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
        )
    from croniter import croniter  # loaded by the first cron schedule (see cron_after)

    if not croniter.is_valid(expanded):
        raise InvalidValue(f"invalid cron expression {expr!r} for {what}")
    try:
        cron_after(expanded, ZoneInfo("UTC"), 0.0)
    except Exception as exc:  # e.g. "0 0 30 2 *": a date that never comes
        raise InvalidValue(f"cron expression {expr!r} for {what} never fires ({exc})") from None
    return text


def _check_zone(tz: Any, what: str) -> str:
    if not isinstance(tz, str) or not tz:
        raise InvalidValue(
            f"invalid time zone {tz!r} for {what} (an IANA name, e.g. 'Europe/Berlin')"
        )
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidValue(
            f"unknown time zone {tz!r} for {what} (an IANA name, e.g. 'Europe/Berlin')"
        ) from None
    return tz


NOT_SCHEDULED = "it cannot be scheduled: schedules start its runs from the database"


def define(
    workflow: Any,
    *,
    cron: str | None = None,
    every: Any = None,
    tz: str = "UTC",
    overlap: str = "skip",
    catchup: Any = "1h",
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    id: str | None = None,
) -> ScheduleDef:
    """A validated ScheduleDef (not registered); ValueError names whatever is wrong."""
    found = definition_of(workflow)  # a WorkflowEntrypoint class, say
    name = found.name if found is not None else workflow
    if not isinstance(name, str) or not name:
        raise InvalidArguments(
            f"cairn.schedule needs a @cairn.workflow or a workflow name, got {workflow!r}"
        )
    if getattr(workflow, "durable", True) is False:  # a WorkflowDef of durable=False
        raise TransientWorkflow(name, NOT_SCHEDULED)
    schedule_id = name if id is None else id
    if (
        not isinstance(schedule_id, str)
        or not schedule_id.strip()
        or schedule_id != schedule_id.strip()
    ):
        raise InvalidValue(f"invalid schedule id {schedule_id!r} (a non-empty string)")
    check_name(schedule_id, "schedule id")
    what = f"schedule {schedule_id!r}"
    if (cron is None) == (every is None):
        raise InvalidValue(f"{what} needs exactly one of cron= or every=")
    seconds = None
    if cron is not None:
        cron = _check_cron(cron, what)
    else:
        seconds = durations.parse(every, what=f"every of {what}").total_seconds()
        if seconds < MIN_EVERY:
            raise InvalidValue(f"every of {what} must be at least 1s, got {every!r}")
    tz = _check_zone(tz, what)
    if overlap not in OVERLAPS:
        raise InvalidValue(f"invalid overlap {overlap!r} for {what} (one of {', '.join(OVERLAPS)})")
    window = durations.parse(catchup, what=f"catchup of {what}").total_seconds()
    if not isinstance(args, list | tuple):
        raise InvalidArguments(f"args of {what} must be a tuple or list, got {args!r}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise InvalidArguments(f"kwargs of {what} must be a dict, got {kwargs!r}")
    return ScheduleDef(
        id=schedule_id,
        workflow=name,
        cron=cron,
        every=seconds,
        tz=tz,
        overlap=overlap,
        catchup=window,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
    )


def make_schedule(
    workflow: Any, *, reg: registry.Registry | None = None, **options: Any
) -> ScheduleDef:
    """Build, validate and register a schedule (in `reg`, default: the global registry)."""
    defn = define(workflow, **options)
    (reg or registry.default_registry).add_schedule(defn)
    return defn


def schedule(
    workflow: Any,
    *,
    cron: str | None = None,
    every: Any = None,
    tz: str = "UTC",
    overlap: str = "skip",
    catchup: Any = "1h",
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    id: str | None = None,
) -> ScheduleDef:
    """Declare a schedule in code; engines with workers store it and fire its ticks.

    Args:
        workflow: The @cairn.workflow (or its name) each tick starts.
        cron: A 5-field cron expression ("0 9 * * 1-5") or @hourly/@daily/@weekly/...
        every: An interval instead of cron ("1h", "30s", seconds, timedelta; at least 1s);
            ticks are multiples of it since the Unix epoch.
        tz: IANA time zone the cron expression is read in ("UTC").
        overlap: What a tick does while the previous run is still active: "skip" (the
            default), "buffer_one" (start it when that run ends; at most one waits),
            "allow" (start anyway), "cancel_other" (cancel that run, then start).
        catchup: After downtime, missed ticks this recent run once each; older ones are
            dropped ("1h").
        args: Positional arguments of every run.
        kwargs: Keyword arguments of every run.
        id: The schedule's id (default: the workflow's name).

    Returns:
        The ScheduleDef.

    Raises:
        ValueError: A bad cron expression, time zone, interval, overlap or catchup, or
            both or neither of cron and every; the message names the schedule.
        TransientWorkflow: `workflow` is transient (durable=False).
    """
    return make_schedule(
        workflow,
        cron=cron,
        every=every,
        tz=tz,
        overlap=overlap,
        catchup=catchup,
        args=args,
        kwargs=kwargs,
        id=id,
    )
