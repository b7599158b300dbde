"""`python -m bench.dashboard [N]`: the dashboard's runs list over N runs (default 100,000).

For SQLite and PostgreSQL (when reachable) a fresh database gets N runs of a few
workflows and statuses with two columns (`customer`: 1,000 values, `region`: 3),
bulk-inserted with plain SQL (bench only). Then, interleaved round by round on the same
database: `GET /api/v1/runs` through the dashboard's ASGI app in-process (server time:
from the request entering the app to its last body byte), `engine.list_runs` beneath it,
and the store's own SELECT (the same text and parameters, ORDER BY ... LIMIT 51: the API
reads one row past its page of 50) on a plain driver connection; and the runs page
(`GET /`, HTML) with the same filters, which also counts the runs of each status under
them (`_sql.count_runs`, timed on its own as `counts`). Runs are started by a mix of
origins (85% api, 8% schedule, 4% trigger, 2% parent, 1% not recorded); the run id
prefix cases search for one run, and for a prefix every run shares.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import cairn
import cairn.dashboard
from bench import postgres
from cairn.dashboard.api import runs as api_runs
from cairn.store import _sql, open_store, sqlite_path
from cairn.store.records import RUN_FIELDS, RunQuery, RunRecord

RUNS = 100_000
ROUNDS = 200
WARM_UP = 20
PAGE = 50
CUSTOMERS = 1_000  # about RUNS / CUSTOMERS runs each
WORKFLOWS = ("orders.process", "billing.invoice", "mail.send", "reports.nightly")
# Of every 100 runs, how many end in each status.
STATUSES = (
    ("COMPLETED", 80),
    ("FAILED", 5),
    ("WAITING", 5),
    ("SLEEPING", 4),
    ("CANCELLED", 3),
    ("PENDING", 3),
)
COLUMN_ROW = "run_id, name, value, created_at"
API_TARGET_MS = 20.0  # GET /api/v1/runs median, from the issue
PAGE_TARGET_MS = 50.0  # the runs page (HTML), server time, from the issue


@dataclass(frozen=True, slots=True)
class Case:
    """One list the dashboard asks for: its query string and the store query beneath it."""

    label: str
    params: dict[str, str]
    query: RunQuery


def page(**filters: Any) -> RunQuery:
    """The store query of a page: one row more than shown, as RunControl asks."""
    return RunQuery(**filters, limit=PAGE + 1)


CUSTOMER = '"c-0042"'  # one of CUSTOMERS: about 100 runs, 80 of them completed
CASES = (
    Case("first page", {}, page()),
    Case("status=completed (80%)", {"status": "completed"}, page(status="COMPLETED")),
    Case("status=failed (5%)", {"status": "failed"}, page(status="FAILED")),
    Case("col.region=eu (33%)", {"col.region": "eu"}, page(columns={"region": '"eu"'})),
    Case(
        "status=completed + col.customer",
        {"status": "completed", "col.customer": "c-0042"},
        page(status="COMPLETED", columns={"customer": CUSTOMER}),
    ),
    Case(
        "status=failed + col.customer",
        {"status": "failed", "col.customer": "c-0042"},
        page(status="FAILED", columns={"customer": CUSTOMER}),
    ),
    Case(
        "status=cancelled (3%) + col.region",
        {"status": "cancelled", "col.region": "eu"},
        page(status="CANCELLED", columns={"region": '"eu"'}),
    ),
    Case("origin=schedule (8%)", {"origin": "schedule"}, page(origin="schedule")),
    Case("origin=unknown (1%)", {"origin": "unknown"}, page(origin="unknown")),
)
ORIGINS = ((85, "api"), (93, "schedule"), (97, "trigger"), (99, "parent"), (100, None))


def prefix_cases(one_id: str) -> tuple[Case, ...]:
    """Searches by run id prefix: for one run (a pasted id), and for every run."""
    return tuple(
        Case(label, {"run_id_prefix": prefix}, page(run_id_prefix=prefix))
        for label, prefix in (
            ("run_id_prefix (1 run)", one_id[:20]),
            ("run_id_prefix (all)", one_id[:2]),
        )
    )


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


# Filling the database


def _status(rng: random.Random) -> str:
    pick = rng.randrange(100)
    for status, share in STATUSES:
        if pick < share:
            return status
        pick -= share
    return STATUSES[0][0]


ERROR = json.dumps(
    {
        "type": "builtins.ValueError",
        "message": "card declined",
        "traceback": 'Traceback (most recent call last):\n  File "orders.py", line 42, in charge\n'
        "    raise ValueError('card declined')\nValueError: card declined\n",
    }
)


def generate(n: int, now: float) -> Iterator[tuple[RunRecord, list[tuple[str, str, str, float]]]]:
    """N runs over the last 30 days, oldest first, with their column rows."""
    rng = random.Random(7)
    span = 30 * 86400.0
    for i in range(n):
        created = now - span + span * i / n + rng.random() * 0.01
        run_id = f"{int(created * 1000):012x}{rng.getrandbits(80):020x}"
        status = _status(rng)
        finished = status in ("COMPLETED", "FAILED", "CANCELLED")
        customer = f"c-{rng.randrange(CUSTOMERS):04d}"
        region = ("eu", "us", "apac")[i % 3]
        columns = {"customer": customer, "region": region}
        run = RunRecord(
            run_id=run_id,
            workflow=WORKFLOWS[i % len(WORKFLOWS)],
            status=status,
            args=json.dumps({"args": [f"o-{i}"], "kwargs": {}}),
            created_at=created,
            updated_at=created + 2.0,
            result='{"ok": true}' if status == "COMPLETED" else None,
            error=ERROR if status == "FAILED" else None,
            started_at=None if status == "PENDING" else created + 0.01,
            finished_at=created + 2.0 if finished else None,
            attempt=0 if status == "PENDING" else 1,
            wake_at=now + 86400.0 if status in ("SLEEPING", "WAITING") else None,
            columns=json.dumps(columns, sort_keys=True),
            waiting_for="event:approval" if status == "WAITING" else None,
            origin=next(origin for share, origin in ORIGINS if i % 100 < share),
        )
        rows = [
            (run_id, name, json.dumps(value, sort_keys=True), created)
            for name, value in columns.items()
        ]
        yield run, rows


def fill_sqlite(url: str, n: int, now: float) -> None:
    runs, columns = _batches(n, now)
    insert_runs = f"INSERT INTO runs ({_sql.RUN_COLUMNS}) VALUES ({', '.join('?' * len(runs[0]))})"
    with contextlib.closing(sqlite3.connect(sqlite_path(url))) as conn, conn:
        conn.execute("PRAGMA cache_size = -262144")  # 256 MiB: the indexes fit while loading
        conn.executemany(insert_runs, runs)
        conn.executemany(f"INSERT INTO run_columns ({COLUMN_ROW}) VALUES (?, ?, ?, ?)", columns)


def fill_postgres(url: str, n: int, now: float) -> None:
    import psycopg

    runs, columns = _batches(n, now)
    with psycopg.connect(url) as conn:
        with conn.cursor().copy(f"COPY runs ({_sql.RUN_COLUMNS}) FROM STDIN") as copy:
            for row in runs:
                copy.write_row(row)
        with conn.cursor().copy(f"COPY run_columns ({COLUMN_ROW}) FROM STDIN") as copy:
            for row in columns:
                copy.write_row(row)
        conn.commit()
        # What autovacuum does within a minute of a bulk load; SQLite is left without
        # statistics, as cairn leaves it.
        conn.execute("ANALYZE runs")
        conn.execute("ANALYZE run_columns")
        conn.commit()


def _batches(n: int, now: float) -> tuple[list[tuple[Any, ...]], list[tuple[str, str, str, float]]]:
    runs: list[tuple[Any, ...]] = []
    columns: list[tuple[str, str, str, float]] = []
    for run, rows in generate(n, now):
        runs.append(tuple(getattr(run, name) for name in RUN_FIELDS))
        columns.extend(rows)
    return runs, columns


# Raw queries on a plain connection


class RawSqlite:
    """The store's SELECT on a sqlite3 connection of its own."""

    def __init__(self, url: str) -> None:
        self.conn = sqlite3.connect(sqlite_path(url))

    def rows(self, query: RunQuery) -> list[Any]:
        text, params = _sql.list_runs(query)
        return self.conn.execute(text, params).fetchall()

    def count(self, query: RunQuery, limit: int | None) -> list[Any]:
        text, params = _sql.count_runs(query, limit)
        return self.conn.execute(text, params).fetchall()

    def plan(self, query: RunQuery) -> str:
        text, params = _sql.list_runs(query)
        found = self.conn.execute("EXPLAIN QUERY PLAN " + text, params).fetchall()
        return "; ".join(str(row[-1]) for row in found)

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """The store's SELECT on a psycopg connection of its own (prepared after 5 uses)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def rows(self, query: RunQuery) -> list[Any]:
        text, params = _sql.list_runs(query)
        return self.conn.execute(text.replace("?", "%s"), params).fetchall()

    def count(self, query: RunQuery, limit: int | None) -> list[Any]:
        text, params = _sql.count_runs(query, limit)
        return self.conn.execute(text.replace("?", "%s"), params).fetchall()

    def plan(self, query: RunQuery) -> str:
        text, params = _sql.list_runs(query)
        found = self.conn.execute("EXPLAIN " + text.replace("?", "%s"), params).fetchall()
        return "; ".join(str(row[0]).strip() for row in found)

    def close(self) -> None:
        self.conn.close()


# Timing


class ServerTime:
    """ASGI middleware: how long the app took, up to the last body message it sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        began = time.perf_counter()

        async def timed(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.last = time.perf_counter() - began
            await send(message)

        await self.app(scope, receive, timed)


async def measure(url: str, raw: RawSqlite | RawPostgres, rounds: int) -> dict[str, Any]:
    """Interleave API, engine.list_runs and the raw SELECT for every case, `rounds` times."""
    results: dict[str, Any] = {}
    one_id = raw.rows(RunQuery(limit=PAGE))[PAGE // 2][0]  # a run of the first page
    async with cairn.Engine(url, workers=0) as engine:
        timer = ServerTime(cairn.dashboard.app(engine))
        transport = httpx.ASGITransport(app=timer)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for case in (*CASES, *prefix_cases(one_id)):
                seconds: dict[str, list[float]] = {
                    "raw": [],
                    "control": [],
                    "api": [],
                    "html": [],
                    "counts": [],
                }
                kwargs = _control_kwargs(case)
                # What the page counts: every run without filters, else up to a limit.
                counted = None if kwargs.keys() <= {"status"} else api_runs.COUNT_LIMIT + 1
                for i in range(WARM_UP + rounds):
                    began = time.perf_counter()
                    rows = raw.rows(case.query)
                    raw_s = time.perf_counter() - began
                    began = time.perf_counter()
                    page = await engine.list_runs(**kwargs, limit=PAGE)
                    control_s = time.perf_counter() - began
                    response = await client.get("/api/v1/runs", params=case.params)
                    response.raise_for_status()
                    listed = [run["run_id"] for run in response.json()["runs"]]
                    api_s = timer.last
                    html = await client.get("/", params=case.params)  # the runs page
                    html.raise_for_status()
                    html_s = timer.last
                    began = time.perf_counter()
                    raw.count(case.query, counted)
                    counts_s = time.perf_counter() - began
                    if i < WARM_UP:
                        continue
                    # The three layers must answer the same page.
                    assert listed == [r.run_id for r in page.runs], case.label
                    assert listed == [row[0] for row in rows[:PAGE]], case.label
                    seconds["raw"].append(raw_s)
                    seconds["control"].append(control_s)
                    seconds["api"].append(api_s)
                    seconds["html"].append(html_s)
                    seconds["counts"].append(counts_s)
                results[case.label] = {
                    "rows": len(listed),
                    **{f"{k}_ms": statistics.median(v) * 1000 for k, v in seconds.items()},
                    "plan": raw.plan(case.query),
                }
    return results


def _control_kwargs(case: Case) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if case.query.status is not None:
        kwargs["status"] = case.query.status
    if case.query.columns:
        kwargs["columns"] = {k: json.loads(v) for k, v in case.query.columns.items()}
    for name in ("origin", "run_id_prefix"):
        if getattr(case.query, name) is not None:
            kwargs[name] = getattr(case.query, name)
    return kwargs


# The two stores


def prepare(url: str) -> None:
    """Create the schema (every migration) on an empty database."""

    async def migrate() -> None:
        store = open_store(url)
        await store.open()
        await store.close()

    asyncio.run(migrate())


def run_store(
    name: str,
    url: str,
    n: int,
    rounds: int,
    fill: Callable[[str, int, float], None],
    raw: Callable[[str], RawSqlite | RawPostgres],
) -> dict[str, Any]:
    prepare(url)
    note(f"{name}: inserting {n:,} runs")
    began = time.perf_counter()
    fill(url, n, time.time())
    note(f"{name}: inserted in {time.perf_counter() - began:.1f} s; timing {rounds} rounds")
    conn = raw(url)
    try:
        return {"cases": asyncio.run(measure(url, conn, rounds))}
    finally:
        conn.close()


def run_sqlite(folder: Path, n: int, rounds: int) -> dict[str, Any]:
    url = f"sqlite:///{folder / 'dashboard.db'}"
    return run_store("sqlite", url, n, rounds, fill_sqlite, RawSqlite)


def run_postgres(n: int, rounds: int) -> dict[str, Any]:
    reason = postgres.problem()
    if reason is not None:
        return {"skipped": reason}
    with postgres.fresh_database() as url:
        return run_store("postgres", url, n, rounds, fill_postgres, RawPostgres)


def measured(report: dict[str, Any], lines: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each store's label and numbers; a store that was skipped gets a line saying why."""
    for store, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        data = report[store]
        if "skipped" in data:
            lines.append(f"{label:<11} skipped: {data['skipped']}")
        else:
            yield label, data


def table(report: dict[str, Any]) -> str:
    lines = [
        f"GET /api/v1/runs over {report['runs']:,} runs (median of {report['rounds']} rounds, "
        f"ms; ratio = API server time / raw SELECT)",
        "",
    ]
    header = (
        f"{'store':<11} {'list':<35} {'rows':>4} {'raw SELECT':>10} {'list_runs':>10} "
        f"{'API':>8} {'ratio':>7} {'counts':>7} {'page':>8}  targets"
    )
    lines += [header, "-" * len(header)]
    for label, data in measured(report, lines):
        for case, found in data["cases"].items():
            ok = found["api_ms"] < API_TARGET_MS and found["html_ms"] < PAGE_TARGET_MS
            lines.append(
                f"{label:<11} {case:<35} {found['rows']:>4} {found['raw_ms']:>10.2f} "
                f"{found['control_ms']:>10.2f} {found['api_ms']:>8.2f} "
                f"{found['api_ms'] / found['raw_ms']:>6.1f}x {found['counts_ms']:>7.2f} "
                f"{found['html_ms']:>8.2f}  "
                f"< {API_TARGET_MS:.0f} / {PAGE_TARGET_MS:.0f} ms {'ok' if ok else 'MISSED'}"
            )
    lines += [
        "",
        "raw SELECT: the store's own query text on a plain driver connection; list_runs:",
        "engine.list_runs (store + summaries); API: the ASGI app's server time (routing, query",
        "parsing, JSON). SQLite has no ANALYZE statistics (cairn never gathers them);",
        "PostgreSQL is ANALYZEd after the bulk load, as autovacuum would.",
        "page: the server time of the runs page (GET / with the same filters, HTML), which",
        "also runs counts: the grouped count of each status under the same filters (raw;",
        "every run without filters, at most 10,001 under filters, as the page counts).",
    ]
    if report.get("plans"):
        lines.append("")
        for store in ("sqlite", "postgres"):
            for case, found in report[store].get("cases", {}).items():
                lines.append(f"{store} {case}: {found['plan']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    parser.add_argument("runs", nargs="?", type=int, default=RUNS, help="runs in the database")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per list")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--plans", action="store_true", help="print each query's plan")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cairn-bench-dashboard-") as tmp:
        report: dict[str, Any] = {
            "runs": args.runs,
            "rounds": args.rounds,
            "plans": args.plans,
            "sqlite": run_sqlite(Path(tmp), args.runs, args.rounds),
            "postgres": (
                {"skipped": "--no-postgres"}
                if args.no_postgres
                else run_postgres(args.runs, args.rounds)
            ),
        }
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
