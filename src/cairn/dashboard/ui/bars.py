"""The run page's compact timeline: each step attempt, sleep and wait as a bar on one time axis.

Drawn on the server as SVG (no script, no inline style: positions are SVG attributes in
percent of the axis). Up to `LABELLED` entries get a row each, named on the left; a
longer history is packed into lanes (an entry takes the first lane free at its start,
as sequential steps all are), so a run of thousands of steps still reads at a glance
and every bar still names itself on hover.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cairn.models import HistoryEntry
from cairn.representation import words
from cairn.store.records import RunRecord

LABELLED = 60  # entries drawn one per row; more are packed into lanes
MAX_LANES = 24
MIN_WIDTH = 0.4  # percent of the axis: an instant still shows
LABEL = 26  # characters of a row's label shown (the whole name is its hover text)
TICKS = 5
MERGE_GAP = 0.1  # percent: bars of one kind closer than this in a lane are drawn as one
WORDS = {
    "ok": "steps that succeeded",
    "failed": "failed attempts",
    "backoff": "waits before a retry",
    "sleep": "sleeps",
    "wait": "waits",
    "open": "entries not over yet",
    "instant": "entries",
}
WAITS = ("event", "hook", "task", "child", "receive")


@dataclass(slots=True)
class Bar:
    """One drawn span: where it lies on the axis (percent), its look and its hover text."""

    x: float
    width: float
    kind: str
    """The CSS class: ok, failed, backoff, sleep, wait, open (not over yet) or instant."""
    title: str
    since: float = 0.0
    """Percent: where it truly begins (`x` keeps a bar at the end inside the axis)."""
    until: float = 0.0
    """Percent: where it truly ends (`x + width` is at least MIN_WIDTH wide)."""
    name: str = ""
    """The entry it belongs to."""
    merged: int = 1
    """How many bars of one kind, side by side in a lane, it stands for."""


@dataclass(slots=True)
class Row:
    """One row (an entry) or lane (several entries) of the chart."""

    label: str
    bars: list[Bar] = field(default_factory=list)
    end: float = 0.0  # percent: where its last bar ends (for packing)
    short: str = ""  # the label as shown, cut to LABEL characters


def chart(
    run: RunRecord,
    entries: list[HistoryEntry],
    attempts: list[dict[str, Any]],
    now: float,
) -> dict[str, Any] | None:
    """The chart's rows and axis ticks for the template; None when there is nothing to draw."""
    start = run.started_at or run.created_at
    end = run.finished_at or now
    spans = [_spans(entry, attempts, end) for entry in entries]
    spans += _retrying(entries, attempts, end)
    moments = [moment for _, found in spans for s, e, _, _ in found for moment in (s, e)]
    if not moments:
        return None
    start, end = min(start, *moments), max(end, *moments)
    length = max(end - start, 1e-3)

    def place(s: float, e: float, kind: str, title: str) -> Bar:
        x = min(max(100.0 * (s - start) / length, 0.0), 100.0 - MIN_WIDTH)
        width = min(max(100.0 * (e - s) / length, MIN_WIDTH), 100.0 - x)
        since, until = 100.0 * (s - start) / length, 100.0 * (e - start) / length
        return Bar(round(x, 3), round(width, 3), kind, title, since, until)

    drawn = [(label, [place(*span) for span in found]) for label, found in spans if found]
    for label, found in drawn:
        for bar in found:
            bar.name = label
    if len(drawn) <= LABELLED:
        rows = [Row(label, bars) for label, bars in drawn]
        packed = False
        for row in rows:
            row.short = row.label if len(row.label) <= LABEL else row.label[: LABEL - 1] + "…"
    else:
        rows = _pack(drawn)
        packed = True
    for row in rows:  # failures drawn last, so a brief one's red is never hidden
        row.bars.sort(key=lambda b: b.kind == "failed")
    return {
        "rows": rows,
        "packed": packed,
        "entries": len(drawn),
        "ticks": [
            {"x": round(100.0 * i / TICKS, 3), "text": _offset(length * i / TICKS)}
            for i in range(TICKS + 1)
        ],
        "open": run.finished_at is None,
    }


Span = tuple[float, float, str, str]  # start, end (epoch seconds), kind, hover text


def _spans(
    entry: HistoryEntry, attempts: list[dict[str, Any]], end: float
) -> tuple[str, list[Span]]:
    """An entry's label and its spans: a step's every attempt and backoff, a sleep, a wait."""
    name = entry.key or entry.name
    began, ended = _ts(entry.started_at), _ts(entry.finished_at)
    if began is None:
        return name, []
    if entry.kind == "step":
        found: list[Span] = []
        tries = [a for a in attempts if a["key"] == entry.key]
        for attempt in tries:
            found += _attempt(name, attempt)
        if not (entry.status == "failed" and tries):  # a failed step's last try is listed
            finish = ended if ended is not None else end
            kind = "failed" if entry.status == "failed" else "ok"
            if ended is None:
                kind = "open"
            number = max(entry.attempts, len(tries) + 1)
            what = f"attempt {number} {entry.status}" if tries else entry.status
            found.append((began, finish, kind, _title(name, what, began, finish)))
        return name, found
    if entry.kind == "sleep":
        wake = entry.result if isinstance(entry.result, int | float) else ended
        finish = min(float(wake), end) if wake is not None else end
        kind = "sleep" if entry.status in ("completed", "cancelled") else "open"
        title = _title(name, f"sleep until {words.when(wake)}", began, finish)
        return name, [(began, max(finish, began), kind, title)]
    if entry.kind in WAITS:
        finish = ended if ended is not None else end
        kind = "open" if ended is None else "failed" if entry.status == "failed" else "wait"
        what = words.received(entry) or f"{entry.kind} {entry.name!r} {entry.status}"
        return name, [(began, finish, kind, _title(name, what, began, finish))]
    what = words.scheduled(entry) or entry.kind
    return name, [(began, ended or began, "instant", _title(name, what, began, ended))]


def _attempt(name: str, attempt: dict[str, Any]) -> list[Span]:
    """A failed attempt, and the backoff that followed it."""
    failed = _ts(attempt["failed_at"])
    if failed is None:
        return []
    began = _ts(attempt.get("started_at")) or failed
    message = words.error_line(attempt)
    what = f"attempt {attempt['attempt']} failed: {message}"
    found: list[Span] = [(began, failed, "failed", _title(name, what, began, failed))]
    retry = _ts(attempt.get("retry_at"))
    if retry is not None and retry > failed:
        title = _title(name, f"waiting to retry at {words.when(retry)}", failed, retry)
        found.append((failed, retry, "backoff", title))
    return found


def _retrying(
    entries: list[HistoryEntry], attempts: list[dict[str, Any]], end: float
) -> list[tuple[str, list[Span]]]:
    """The steps with failed attempts and no entry yet (between retries)."""
    recorded = {entry.key for entry in entries}
    keys = list(dict.fromkeys(a["key"] for a in attempts if a["key"] not in recorded))
    found = []
    for key in keys:
        spans = [span for a in attempts if a["key"] == key for span in _attempt(key, a)]
        found.append((key, [(s, min(e, end), kind, title) for s, e, kind, title in spans]))
    return found


def _pack(drawn: list[tuple[str, list[Bar]]]) -> list[Row]:
    """Entries in lanes: each in the first lane whose bars end before it begins.

    Sequential entries (most runs) share one lane; concurrent ones (gathered steps,
    children) take more, up to MAX_LANES.
    """
    lanes: list[Row] = []
    for _, bars in sorted(drawn, key=lambda item: min(b.since for b in item[1])):
        first = min(b.since for b in bars)
        # Overlaps thinner than MERGE_GAP (x is rounded, and a step's end is stamped as
        # its record is written) are not concurrency: sequential entries share a lane.
        lane = next((lane for lane in lanes if lane.end <= first + MERGE_GAP), None)
        if lane is None and len(lanes) < MAX_LANES:
            lane = Row("")
            lanes.append(lane)
        elif lane is None:
            lane = min(lanes, key=lambda row: row.end)  # too many at once: overlap
        lane.bars.extend(bars)
        lane.end = max(lane.end, max(b.until for b in bars))
    for lane in lanes:
        lane.bars = _merged(lane.bars)
    return lanes


def _merged(found: list[Bar]) -> list[Bar]:
    """A lane's bars with runs of one kind that touch drawn as one, named by their ends.

    A lane of thousands of steps would otherwise be thousands of elements: a page of
    megabytes for bars thinner than a pixel. Merged, a lane holds at most about
    100 / MERGE_GAP bars of each kind.
    """
    kept: list[Bar] = []
    for bar in sorted(found, key=lambda b: b.x):
        last = next((b for b in reversed(kept[-4:]) if b.kind == bar.kind), None)
        if last is not None and bar.x <= last.x + last.width + MERGE_GAP:
            first_name = last.name.partition(" … ")[0]
            last.width = round(max(last.x + last.width, bar.x + bar.width) - last.x, 3)
            last.until = max(last.until, bar.until)
            last.merged += 1
            last.name = f"{first_name} … {bar.name}"
            last.title = f"{last.name}: {last.merged} {WORDS.get(bar.kind, bar.kind)}"
            continue
        kept.append(bar)
    return kept


def _title(name: str, what: str, began: float, ended: float | None) -> str:
    took = "" if ended is None else f", {words.seconds(max(0.0, ended - began))}"
    return f"{name}: {what} (from {words.when(began)}{took})"


def _offset(seconds: float) -> str:
    return "0" if seconds <= 0 else "+" + words.seconds(seconds)


def _ts(moment: datetime | float | None) -> float | None:
    if moment is None:
        return None
    return moment.timestamp() if isinstance(moment, datetime) else float(moment)
