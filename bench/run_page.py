"""`python -m bench.run_page [STEPS...]`: a run's page and history against the run's length.

For SQLite and PostgreSQL (when reachable) a fresh database gets one completed run per
size (default 10, 100 and 1,000 steps), executed by a real engine: every step has an
input and a result of about 200 bytes of JSON, as an order's line items might. Then,
interleaved round by round: the store's own SELECT of the run's steps on a plain driver
connection, `engine.history`, `GET /api/v1/runs/{id}/history` and the run's page
(`GET /runs/{id}`, HTML), each timed as server time in the dashboard's ASGI app.

The run page renders the last TIMELINE_SHOWN entries of the timeline (`?timeline=all`
renders every one, timed apart), so past that its cost grows only with reading the
history; the ratio to the raw SELECT says how much of it is cairn's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import cairn
import cairn.dashboard
from bench import postgres
from bench.dashboard import ServerTime, measured, note, prepare
from cairn.dashboard.ui.run import TIMELINE_SHOWN
from cairn.store import _sql, sqlite_path

SIZES = (10, 100, 1_000)
ROUNDS = 30
WARM_UP = 3
LINE = {"sku": "SKU-000000", "qty": 3, "price": "19.99", "note": "gift wrap, leave at door"}


@cairn.step(name="bench.line")
async def price_line(order: str, line: dict[str, Any]) -> dict[str, Any]:
    return {"order": order, **line, "total": "59.97", "tax": "11.39"}


@cairn.workflow(name="bench.long_order")
async def long_order(order: str, steps: int) -> int:
    for i in range(steps):
        await price_line(order, {**LINE, "sku": f"SKU-{i:06d}"})
    return steps


async def fill(url: str, sizes: tuple[int, ...]) -> dict[int, str]:
    """One completed run per size; their ids."""
    ids: dict[int, str] = {}
    async with cairn.Engine(url) as engine:
        for steps in sizes:
            run = await engine.start(long_order, f"o-{steps}", steps, run_id=f"long-{steps}")
            await run.result(timeout=600)
            ids[steps] = run.run_id
    return ids


def raw_reader(url: str) -> Any:
    """A function that runs the store's SELECT of a run's steps on a connection of its own."""
    if url.startswith("sqlite"):
        conn: Any = sqlite3.connect(sqlite_path(url))
        return lambda run_id: conn.execute(_sql.SELECT_HISTORY, (run_id,)).fetchall()
    import psycopg

    pg = psycopg.connect(url, autocommit=True)
    text = _sql.SELECT_HISTORY.replace("?", "%s")
    return lambda run_id: pg.execute(text, (run_id,)).fetchall()


async def measure(url: str, ids: dict[int, str], rounds: int) -> dict[str, Any]:
    read = raw_reader(url)
    results: dict[str, Any] = {}
    async with cairn.Engine(url, workers=0) as engine:
        timer = ServerTime(cairn.dashboard.app(engine))
        transport = httpx.ASGITransport(app=timer)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for steps, run_id in ids.items():
                seconds: dict[str, list[float]] = {
                    "raw": [],
                    "history": [],
                    "api": [],
                    "html": [],
                    "all": [],
                }
                size = whole = 0
                for i in range(WARM_UP + rounds):
                    began = time.perf_counter()
                    rows = read(run_id)
                    raw_s = time.perf_counter() - began
                    began = time.perf_counter()
                    history = await engine.history(run_id)
                    history_s = time.perf_counter() - began
                    api = await client.get(f"/api/v1/runs/{run_id}/history")
                    api.raise_for_status()
                    api_s = timer.last
                    html = await client.get(f"/runs/{run_id}")
                    html.raise_for_status()
                    html_s = timer.last
                    everything = await client.get(f"/runs/{run_id}?timeline=all")
                    everything.raise_for_status()
                    if i < WARM_UP:
                        continue
                    assert len(rows) == len(history) == steps, (steps, len(rows))
                    assert len(api.json()["history"]) == steps
                    size, whole = len(html.content), len(everything.content)
                    seconds["raw"].append(raw_s)
                    seconds["history"].append(history_s)
                    seconds["api"].append(api_s)
                    seconds["html"].append(html_s)
                    seconds["all"].append(timer.last)
                results[str(steps)] = {
                    **{f"{k}_ms": statistics.median(v) * 1000 for k, v in seconds.items()},
                    "page_kib": size / 1024,
                    "all_kib": whole / 1024,
                }
    return results


def run_store(url: str, sizes: tuple[int, ...], rounds: int, name: str) -> dict[str, Any]:
    prepare(url)
    note(f"{name}: running one order of each of {', '.join(map(str, sizes))} steps")
    ids = asyncio.run(fill(url, sizes))
    note(f"{name}: timing {rounds} rounds")
    return {"sizes": asyncio.run(measure(url, ids, rounds))}


def table(report: dict[str, Any]) -> str:
    lines = [
        f"A run's history and page against its length (median of {report['rounds']} rounds, "
        "ms; ratio = server time / raw SELECT)",
        "",
    ]
    header = (
        f"{'store':<11} {'steps':>6} {'raw SELECT':>10} {'history':>8} {'API':>8} {'ratio':>7} "
        f"{'page':>8} {'ratio':>7} {'KiB':>5} {'all':>8} {'KiB':>5}"
    )
    lines += [header, "-" * len(header)]
    for label, data in measured(report, lines):
        for steps, found in data["sizes"].items():
            raw = found["raw_ms"]
            lines.append(
                f"{label:<11} {int(steps):>6,} {raw:>10.2f} {found['history_ms']:>8.2f} "
                f"{found['api_ms']:>8.2f} {found['api_ms'] / raw:>6.1f}x "
                f"{found['html_ms']:>8.2f} {found['html_ms'] / raw:>6.1f}x "
                f"{found['page_kib']:>5.0f} {found['all_ms']:>8.2f} {found['all_kib']:>5.0f}"
            )
    lines += [
        "",
        "raw SELECT: the store's query of the run's steps (inputs included) on a plain driver",
        "connection; history: engine.history (store reads + deserializing); API: GET",
        "/api/v1/runs/{id}/history; page: GET /runs/{id}, the run's HTML page (its timeline's",
        f"last {TIMELINE_SHOWN} entries); all: GET /runs/{{id}}?timeline=all, every entry.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_page", description=__doc__)
    parser.add_argument("steps", nargs="*", type=int, help="the runs' lengths (10 100 1000)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per run")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    sizes = tuple(args.steps) or SIZES
    report: dict[str, Any] = {"rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="cairn-bench-run-page-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'run_page.db'}"
        report["sqlite"] = run_store(url, sizes, args.rounds, "sqlite")
    reason = "--no-postgres" if args.no_postgres else postgres.problem()
    if reason is not None:
        report["postgres"] = {"skipped": reason}
    else:
        with postgres.fresh_database() as url:
            report["postgres"] = run_store(url, sizes, args.rounds, "postgres")
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
