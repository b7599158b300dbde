"""ScheduleDef, a schedule declared in code, and the pure arithmetic of its ticks.

Cron expressions are read by croniter and walked in local wall-clock time of a zoneinfo
time zone; what happens at daylight-saving changes is decided here (see `ScheduleDef`).
`cairn.schedule` (authoring/schedules.py) checks and registers one; firing ticks,
overlap and storage live in the runtime and the store, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

# A tick found this late is still on time, whatever `catchup` says (scheduler latency).
# Small, so that a short window such as catchup="2s" is honoured as written.
MIN_CATCHUP = 1.0
# Ticks fired per schedule in one scheduler pass; a longer backlog takes several passes.
MAX_TICKS = 100
MACROS = {
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
    expr = MACROS.get(expr.strip(), expr)
    both = expr.split()[1].startswith("*")  # the hour field: follow elapsed time on fall-back
    start = datetime.fromtimestamp(moment, zone).replace(tzinfo=None) - _SLACK
    # croniter (with dateutil) is a few percent of `import cairn`, and most processes
    # never read a cron expression: it is loaded by the first one.
    from croniter import croniter

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
