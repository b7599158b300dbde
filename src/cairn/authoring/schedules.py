"""`cairn.schedule`: schedules declared in code, and the pure arithmetic of their ticks.

Cron expressions are read by croniter and walked in local wall-clock time of a zoneinfo
time zone; what happens at daylight-saving changes is decided here (see `ScheduleDef`).
Firing ticks, overlap and storage live in the runtime and the store, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from cairn import durations
from cairn.errors import InvalidArguments, InvalidValue, TransientWorkflow
from cairn.names import check_name

if TYPE_CHECKING:
    from cairn.authoring.registry import Registry

OVERLAPS = ("skip", "buffer_one", "allow", "cancel_other")
MIN_EVERY = 1.0
# A tick found this late is still on time, whatever `catchup` says (scheduler latency).
# Small, so that a short window such as catchup="2s" is honoured as written.
MIN_CATCHUP = 1.0
# Ticks fired per schedule in one scheduler pass; a longer backlog takes several passes.
MAX_TICKS = 100
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Wall times are searched from this far before the instant of interest: more than any
# daylight-saving shift, so ticks of a repeated hour are not missed.
_SLACK = timedelta(hours=3)


@dataclass(frozen=True, slots=True)
class ScheduleDef:
    """A schedule: start `workflow` on every tick of `cron` (in `tz`) or of `every`.

    Ticks of `every` are multiples of the interval since the Unix epoch (UTC), so
    `every="1h"` ticks on the hour. Cron ticks are wall-clock times in `tz`. When clocks
    spring forward, times in the skipped hour tick once, at the change. When they fall
    back, an expression whose hour field starts with `*` ticks in both passes of the
    repeated hour (it follows elapsed time); any other ticks only in the first.
    """

    id: str
    workflow: str
    cron: str | None
    every: float | None
    tz: str
    overlap: str
    catchup: float
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def zone(self) -> ZoneInfo:
        """The time zone cron expressions are read in."""
        return ZoneInfo(self.tz)

    def next_after(self, moment: float) -> float:
        """The first tick strictly after `moment` (epoch seconds)."""
        if self.every is not None:
            tick = (math.floor(moment / self.every) + 1) * self.every
            return tick if tick > moment else tick + self.every
        assert self.cron is not None
        return cron_after(self.cron, self.zone, moment)

    def due(
        self, next_tick: float, now: float, *, limit: int = MAX_TICKS
    ) -> tuple[list[float], float]:
        """The ticks to fire at `now`, starting at `next_tick`, and the next tick after them.

        Missed ticks older than the catch-up window (`catchup`, at least MIN_CATCHUP
        seconds before `now`) are dropped; at most `limit` ticks are returned, so the next
        tick may itself be due already.
        """
        window = now - max(self.catchup, MIN_CATCHUP)
        tick = next_tick
        if tick < window:
            tick = max(tick, self.next_after(window - 1e-6))
        ticks: list[float] = []
        while tick <= now and len(ticks) < limit:
            ticks.append(tick)
            tick = self.next_after(tick)
        return ticks, tick

    def run_id(self, tick: float) -> str:
        """The id of the run of `tick`: the same in every engine, so a tick runs once."""
        return tick_run_id(self.id, tick)

    def describe(self) -> str:
        """`cron "0 9 * * 1-5" in Europe/Berlin` or `every 1h`."""
        if self.cron is not None:
            return f"cron {self.cron!r} in {self.tz}"
        assert self.every is not None
        return f"every {describe_seconds(self.every)}"


def tick_run_id(schedule_id: str, tick: float) -> str:
    """`sched:ID:2024-03-30T12:00:00Z`, the run id of a schedule's tick."""
    return f"sched:{schedule_id}:{iso(tick)}"


def iso(moment: float) -> str:
    """An epoch time as ISO 8601 in UTC with a `Z` suffix."""
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def describe_seconds(seconds: float) -> str:
    """A duration in seconds as cairn writes durations ("1h30m", "45s", "1.5s")."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"


def cron_after(expr: str, zone: ZoneInfo, moment: float) -> float:
    """The first tick of the 5-field cron `expr`, read in `zone`, strictly after `moment`."""
    expr = _MACROS.get(expr.strip(), expr)
    both = expr.split()[1].startswith("*")  # the hour field: follow elapsed time on fall-back
    start = datetime.fromtimestamp(moment, zone).replace(tzinfo=None) - _SLACK
    walls = croniter(expr, start)
    best: float | None = None
    best_wall: datetime | None = None
    while True:
        wall = walls.get_next(datetime)
        if best_wall is not None and wall > best_wall + _SLACK:
            assert best is not None
            return best
        for instant in _instants(wall, zone, both=both):
            if instant > moment and (best is None or instant < best):
                best, best_wall = instant, wall


def _instants(wall: datetime, zone: ZoneInfo, *, both: bool) -> list[float]:
    """The instants a naive local wall time names in `zone`."""
    first = wall.replace(tzinfo=zone, fold=0).timestamp()
    second = wall.replace(tzinfo=zone, fold=1).timestamp()
    if first == second:
        return [first]
    if first < second:  # a repeated time (clocks fell back): `first` is the earlier pass
        return [first, second] if both else [first]
    return [_transition(second, first, zone)]  # a skipped time: tick when the gap ends


def _transition(low: float, high: float, zone: ZoneInfo) -> float:
    """The first whole second in [low, high] with the UTC offset `zone` has at `high`."""
    target = datetime.fromtimestamp(high, zone).utcoffset()
    lo, hi = math.floor(low), math.ceil(high)
    while lo < hi:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid + 1
    return float(lo)


def _check_cron(expr: Any, what: str) -> str:
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidValue(
            f"invalid cron expression {expr!r} for {what} (5 fields, e.g. '0 9 * * *')"
        )
    text = " ".join(expr.split())
    expanded = _MACROS.get(text, text)
    if len(expanded.split()) != 5:
        raise InvalidValue(
            f"invalid cron expression {expr!r} for {what}: need 5 fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
        )
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
    from cairn.authoring.workflow import definition_of

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


def make_schedule(workflow: Any, *, reg: Registry | None = None, **options: Any) -> ScheduleDef:
    """Build, validate and register a schedule (in `reg`, default: the global registry)."""
    from cairn.authoring import registry

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
