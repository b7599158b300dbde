"""`python -m bench.scale [--runs N]`: what a large database costs, beside a small one.

For SQLite and PostgreSQL (when reachable), in fresh databases:

1. Real workflows run once through the engine and leave templates: a finished run of 12
   history entries (11 steps and a sleep, two columns), the same failing at its 12th
   entry, and a run asleep for an hour after one step.
2. The base: 4,000 finished runs copied from the templates (bulk SQL: every row the
   engine wrote for a template, with a new run id, times and column values), about the
   smallest database that fills every page measured.
3. The full database: the base, then N finished runs more (older than the base's, 5%
   failed) and 10,000 sleeping runs, the same way.

The figures are taken on three databases in turns (so load from elsewhere hits each
alike): the full one, the base alone, and an empty one (the templates alone), and the
full database's are divided by the base's (the goal's ratio) and by the empty one's.

Figures (median of rounds): a ten-step run from start to result (one after another),
the claim of a due run (Store.claim_runs, one PENDING run due), `engine.list_runs` (the
first page of 50, a page filtered by status, one by a run column), the dashboard's runs
page (GET /, HTML, server time; it also counts the runs of each status) and its API
(GET /api/v1/runs), bytes on disk per finished run, and, last, how fast prune deletes the
oldest 10,000 finished runs (the `prune_hook` below; skipped where cairn has no prune).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import cairn
import cairn.dashboard
from bench import postgres
from bench.dashboard import ServerTime
from bench.workflows import ten_steps
from cairn.store import open_store, sqlite_path
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord

RUNS = 20_000  # finished runs of the fill (`make bench`); --runs 1000000 for the size
SLEEPERS = 10_000
BASE = 4_000  # finished runs of the base: the rarest list (failed, region eu) fills a page
PAGE = 50
ROUNDS = 100
WARM_UP = 10
TEN_STEP_RUNS = 40
CLAIMS = 60
CUSTOMERS = 1_000
FAILED_SHARE = 20  # one run in 20 failed
TARGET = 1.3  # the goal: every latency within 1.3x of the base
DAY = 86400.0
# The tables that hold a run's rows (messages, hooks and tasks have none for these runs).
RUN_TABLES = ("runs", "steps", "run_columns", "step_attempts", "run_executions")
WORKER = "bench-scale-claimer"


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


# The template workflows


@cairn.step(name="bench.scale.work")
async def work(i: int) -> int:
    return i + 1


@cairn.step(name="bench.scale.charge", retries=1)
async def charge(i: int) -> int:
    raise ValueError(f"card declined for order {i}")


@cairn.workflow(name="bench.scale.order")
async def order(i: int, fail: bool) -> int:
    """12 history entries: 10 steps, a short sleep, then one more step (that may fail)."""
    cairn.set_columns(customer="c-0000", region="eu")
    for _ in range(10):
        i = await work(i)
    await cairn.sleep("10ms")
    return await (charge(i) if fail else work(i))


@cairn.step(name="bench.scale.touch")
async def touch(i: int) -> int:
    return i


@cairn.workflow(name="bench.scale.nap")
async def nap(i: int) -> int:
    await touch(i)
    await cairn.sleep("1h")
    return i


# Copying a template run


@dataclass(frozen=True, slots=True)
class Table:
    """One table's rows of a template run, and how to copy them."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def copies(
        self, run_id: str, shift: float, columns: dict[str, str]
    ) -> Iterator[tuple[Any, ...]]:
        """The template's rows for a run `run_id` created `shift` seconds later."""
        if self.name == "run_columns":
            created = self.rows[0][self.columns.index("created_at")] + shift
            for name, value in columns.items():
                yield tuple(
                    {"run_id": run_id, "name": name, "value": json.dumps(value)}.get(c, created)
                    for c in self.columns
                )
            return
        for row in self.rows:
            yield tuple(
                self._value(c, v, run_id, shift, columns)
                for c, v in zip(self.columns, row, strict=True)
            )

    @staticmethod
    def _value(column: str, value: Any, run_id: str, shift: float, columns: dict[str, str]) -> Any:
        if column == "run_id":
            return run_id
        if column == "columns" and value is not None:
            return json.dumps(columns, sort_keys=True)
        if column.endswith("_at") and isinstance(value, float):
            return value + shift
        return value


@dataclass(slots=True)
class Template:
    """Every row the engine wrote for one run."""

    created_at: float
    tables: list[Table] = field(default_factory=list)

    def rows(
        self, run_id: str, created: float, columns: dict[str, str]
    ) -> Iterator[tuple[str, tuple[Any, ...]]]:
        shift = created - self.created_at
        for table in self.tables:
            for row in table.copies(run_id, shift, columns):
                yield table.name, row


def read_template(conn: Any, run_id: str, marker: str) -> Template:
    """The rows of run `run_id` (`marker`: the driver's parameter mark)."""
    created = conn.execute(f"SELECT created_at FROM runs WHERE run_id = {marker}", (run_id,))
    template = Template(float(created.fetchone()[0]))
    for name in RUN_TABLES:
        cursor = conn.execute(f"SELECT * FROM {name} WHERE run_id = {marker}", (run_id,))
        rows = [tuple(row) for row in cursor.fetchall()]
        if rows:
            template.tables.append(Table(name, tuple(d[0] for d in cursor.description), rows))
    return template


@dataclass(frozen=True, slots=True)
class Templates:
    completed: Template
    failed: Template
    sleeping: Template


async def make_templates(url: str) -> tuple[str, str, str]:
    """Run the template workflows; their run ids (completed, failed, sleeping)."""
    async with cairn.Engine(url, workers=4, poll_interval=0.05) as engine:
        done = await engine.start(order, 1, False)
        failed = await engine.start(order, 2, True)
        sleeping = await engine.start(nap, 3)
        await done.result(timeout=30)
        with contextlib.suppress(Exception):
            await failed.result(timeout=30)
        for _ in range(600):
            if (await sleeping.status()).value == "SLEEPING":
                break
            await asyncio.sleep(0.05)
        for run, status in ((done, "COMPLETED"), (failed, "FAILED"), (sleeping, "SLEEPING")):
            found = (await run.status()).value
            assert found == status, f"template {run.run_id}: {found}, not {status}"
        return done.run_id, failed.run_id, sleeping.run_id


def run_id_at(created: float, rng: random.Random) -> str:
    """An id shaped like cairn.ids.new_run_id for a run created at `created`."""
    return f"{int(created * 1000):012x}{rng.getrandbits(80):020x}"


def finished_rows(
    templates: Templates, n: int, start: float, end: float, seed: int
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """N finished runs created evenly from `start` to `end`, oldest first."""
    rng = random.Random(seed)
    for i in range(n):
        created = start + (end - start) * i / n + rng.random() * 1e-3
        template = templates.failed if rng.randrange(FAILED_SHARE) == 0 else templates.completed
        columns = {
            "customer": f"c-{rng.randrange(CUSTOMERS):04d}",
            "region": ("eu", "us", "apac")[i % 3],
        }
        yield from template.rows(run_id_at(created, rng), created, columns)


def sleeping_rows(
    templates: Templates, n: int, start: float, end: float, now: float
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """N runs asleep until between 1 hour and 1 day from `now`."""
    rng = random.Random(11)
    template = templates.sleeping
    index = next(t for t in template.tables if t.name == "runs").columns.index("wake_at")
    for i in range(n):
        created = start + (end - start) * i / n
        # The copy shifts wake_at with created_at: aim it at now + 1 h .. 1 day instead.
        wake_at = now + 3600 + rng.random() * (DAY - 3600)
        for name, row in template.rows(run_id_at(created, rng), created, {}):
            if name == "runs":
                row = (*row[:index], wake_at, *row[index + 1 :])
            yield name, row


# The two stores' bulk loads


class Sqlite:
    """The SQLite half: a file in a temporary folder."""

    name = "SQLite"
    marker = "?"

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.url = f"sqlite:///{folder / 'scale.db'}"
        self.path = sqlite_path(self.url)

    def connect(self) -> Any:
        return contextlib.closing(sqlite3.connect(self.path))

    def load(self, rows: Iterator[tuple[str, tuple[Any, ...]]], templates: Templates) -> None:
        texts = _insert_texts(templates, "?")
        with self.connect() as conn:
            conn.execute("PRAGMA cache_size = -262144")  # 256 MiB: the indexes fit while loading
            conn.execute("PRAGMA synchronous = OFF")  # bench only: a crash here loses nothing
            batch: dict[str, list[tuple[Any, ...]]] = {}
            count = 0
            for name, row in rows:
                batch.setdefault(name, []).append(row)
                count += 1
                if count >= 200_000:
                    self._flush(conn, texts, batch)
                    batch, count = {}, 0
            self._flush(conn, texts, batch)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @staticmethod
    def _flush(conn: Any, texts: dict[str, str], batch: dict[str, list[tuple[Any, ...]]]) -> None:
        with conn:
            for name in RUN_TABLES:
                if batch.get(name):
                    conn.executemany(texts[name], batch[name])

    def settle(self) -> None:
        """Nothing: cairn never gathers statistics on SQLite, so neither does the bench."""

    def size(self) -> int:
        with self.connect() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wal = Path(self.path + "-wal")
        return os.path.getsize(self.path) + (wal.stat().st_size if wal.exists() else 0)


class Postgres:
    """The PostgreSQL half: a fresh database, dropped afterwards."""

    name = "PostgreSQL"
    marker = "%s"

    def __init__(self, url: str) -> None:
        self.url = url

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def load(self, rows: Iterator[tuple[str, tuple[Any, ...]]], templates: Templates) -> None:
        # One COPY per table at once: a run's rows go to several tables, so they are
        # spooled per table (in batches) and each batch copied in turn.
        with self.connect() as conn:
            columns = {t.name: t.columns for t in _tables(templates)}
            batch: dict[str, list[tuple[Any, ...]]] = {}
            count = 0
            for name, row in rows:
                batch.setdefault(name, []).append(row)
                count += 1
                if count >= 200_000:
                    self._copy(conn, columns, batch)
                    batch, count = {}, 0
            self._copy(conn, columns, batch)

    @staticmethod
    def _copy(
        conn: Any, columns: dict[str, tuple[str, ...]], batch: dict[str, list[tuple[Any, ...]]]
    ) -> None:
        with conn.transaction():
            for name in RUN_TABLES:
                if batch.get(name):
                    text = f"COPY {name} ({', '.join(columns[name])}) FROM STDIN"
                    with conn.cursor().copy(text) as copy:
                        for row in batch[name]:
                            copy.write_row(row)

    def settle(self) -> None:
        """What autovacuum does within a minute of a bulk load: statistics, visibility map."""
        with self.connect() as conn:
            for name in RUN_TABLES:
                conn.execute(f"VACUUM ANALYZE {name}")

    def size(self) -> int:
        with self.connect() as conn:
            row = conn.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()
            return int(row[0])


def _tables(templates: Templates) -> Iterator[Table]:
    seen: set[str] = set()
    for template in (templates.completed, templates.failed, templates.sleeping):
        for table in template.tables:
            if table.name not in seen:
                seen.add(table.name)
                yield table


def _insert_texts(templates: Templates, marker: str) -> dict[str, str]:
    return {
        t.name: f"INSERT INTO {t.name} ({', '.join(t.columns)}) "
        f"VALUES ({', '.join([marker] * len(t.columns))})"
        for t in _tables(templates)
    }


# Measuring

SIDES = ("empty", "base", "full")
Timed = Callable[[], Awaitable[float | None]]


async def side_by_side(rounds: int, probes: dict[str, Timed]) -> dict[str, float]:
    """Median ms of each side's probe, the sides taking turns (load hits both alike).

    A probe returns its own timing, or None to be timed from outside; WARM_UP rounds
    are not counted.
    """
    times: dict[str, list[float]] = {side: [] for side in probes}
    order = list(probes)
    for i in range(WARM_UP + rounds):
        for side in order if i % 2 else reversed(order):
            began = time.perf_counter()
            took = await probes[side]()
            if i >= WARM_UP:
                times[side].append(took if took is not None else time.perf_counter() - began)
    return {side: statistics.median(found) * 1000 for side, found in times.items()}


LISTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("list_runs: first page", {}),
    ("list_runs: status=FAILED (5%)", {"status": "FAILED"}),
    ("list_runs: status=COMPLETED", {"status": "COMPLETED"}),
    ("list_runs: col region=eu (1/3)", {"columns": {"region": "eu"}}),
    ("list_runs: FAILED + col region=eu", {"status": "FAILED", "columns": {"region": "eu"}}),
)
PAGES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("dashboard: runs page (HTML)", "/", {}),
    ("dashboard: runs page, status=failed", "/", {"status": "failed"}),
    ("dashboard: runs page, col.region=eu", "/", {"col.region": "eu"}),
    ("dashboard: GET /api/v1/runs", "/api/v1/runs", {}),
    ("dashboard: API with counts=true", "/api/v1/runs", {"counts": "true"}),
)


async def measure(urls: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    """Every latency figure of each side, in ms."""
    found: dict[str, dict[str, float]] = {side: {} for side in urls}

    def record(label: str, medians: dict[str, float]) -> None:
        for side, ms in medians.items():
            found[side][label] = ms

    async with contextlib.AsyncExitStack() as stack:
        engines = {
            s: await stack.enter_async_context(cairn.Engine(u, workers=4)) for s, u in urls.items()
        }

        def ten_step(engine: cairn.Engine) -> Timed:
            async def once() -> None:
                await (await engine.start(ten_steps, 1)).result(timeout=60)

            return once

        probes = {side: ten_step(engine) for side, engine in engines.items()}
        record("ten-step run, start to result", await side_by_side(TEN_STEP_RUNS, probes))
    async with contextlib.AsyncExitStack() as stack:
        engines = {
            s: await stack.enter_async_context(cairn.Engine(u, workers=0)) for s, u in urls.items()
        }
        claims = {side: await Claims.begin(engine) for side, engine in engines.items()}
        record(
            "claim of a due run", await side_by_side(CLAIMS, {s: c.once for s, c in claims.items()})
        )
        for claim in claims.values():
            await claim.end()
        empty = engines["empty"]
        for label, filters in LISTS:

            def listed(engine: cairn.Engine, filters: dict[str, Any] = filters) -> Timed:
                async def once() -> None:
                    page = await engine.list_runs(**filters, limit=PAGE)
                    # The empty database's pages hold the few runs it has.
                    assert len(page.runs) == PAGE or engine is empty, (filters, len(page.runs))

                return once

            record(label, await side_by_side(rounds, {s: listed(e) for s, e in engines.items()}))
        for label, path, params in PAGES:

            def shown(
                engine: cairn.Engine, path: str = path, params: dict[str, str] = params
            ) -> Timed:
                timer = ServerTime(cairn.dashboard.app(engine))
                transport = httpx.ASGITransport(app=timer)
                client = httpx.AsyncClient(transport=transport, base_url="http://localhost")

                async def once() -> float:
                    response = await client.get(path, params=params)
                    response.raise_for_status()
                    return timer.last

                return once

            record(label, await side_by_side(rounds, {s: shown(e) for s, e in engines.items()}))
    return found


class Claims:
    """Store.claim_runs taking one due PENDING run, started just before (not timed)."""

    def __init__(self, engine: cairn.Engine) -> None:
        self.engine = engine
        self.started = 0

    @classmethod
    async def begin(cls, engine: cairn.Engine) -> Claims:
        now = time.time()
        worker = WorkerRecord(WORKER, "bench", os.getpid(), now, now, concurrency=1, lease=3600.0)
        await engine.store.write(worker_ops.register_worker(worker))
        return cls(engine)

    async def once(self) -> float:
        self.started += 1
        run = await self.engine.start(ten_steps, self.started)
        began = time.perf_counter()
        claimed = await self.engine.store.write(
            claim_ops.claim(WORKER, 1, now=time.time(), stale=False)
        )
        took = time.perf_counter() - began
        assert [r.run_id for r in claimed.runs] == [run.run_id], claimed
        return took

    async def end(self) -> None:
        """Hand the claimed runs back and cancel them: the lists see no RUNNING runs."""
        await self.engine.store.write(worker_ops.remove_worker(WORKER))
        for run in (await self.engine.list_runs(status="PENDING", limit=1000)).runs:
            await self.engine.cancel(run.run_id)


PRUNED = 10_000  # the oldest finished runs the prune figure deletes (fewer for a small fill)


async def prune_hook(url: str, finished_before: float) -> str:
    """HOOK(prune): how fast cairn's prune deletes the oldest finished runs of the fill.

    Prune is built elsewhere (issue 24, helper "retain": cairn.runtime.retention.prune);
    without it this says so instead of measuring anything. Taken last: it deletes runs.
    """
    try:
        from cairn.runtime import retention
    except ImportError:
        return "skipped: cairn has no prune here (cairn.runtime.retention)"
    store = open_store(url)
    await store.open()
    try:
        began = time.perf_counter()
        pruned = await retention.prune(store, finished_before=finished_before, pause=0.0)
        took = time.perf_counter() - began
    finally:
        await store.close()
    if not pruned:
        return "nothing pruned (no finished run old enough)"
    return f"{pruned / took:,.0f} runs/s ({pruned:,} runs in {took:.1f} s, default batches)"


# One store


def prepare(store: Sqlite | Postgres, runs: int) -> Templates:
    """Schema, template runs and `runs` finished runs in a fresh database."""
    ids = asyncio.run(make_templates(store.url))
    with store.connect() as conn:
        templates = Templates(*(read_template(conn, run_id, store.marker) for run_id in ids))
    if not runs:
        return templates
    now = time.time()
    store.load(finished_rows(templates, runs, now - DAY, now - 60, seed=1), templates)
    store.settle()
    return templates


def run_store(stores: dict[str, Any], runs: int, sleepers: int, rounds: int) -> dict[str, Any]:
    base, full = stores["base"], stores["full"]
    note(f"{full.name}: templates (3 runs), then {BASE:,} finished runs, twice")
    prepare(stores["empty"], 0)
    prepare(base, BASE)
    templates = prepare(full, BASE)
    before = full.size()
    note(f"{full.name}: filling {runs:,} finished runs and {sleepers:,} sleeping ones")
    began = time.perf_counter()
    now = time.time()
    oldest, newest = now - 365 * DAY, now - 2 * DAY
    full.load(finished_rows(templates, runs, oldest, newest, seed=2), templates)
    full.settle()
    per_run = (full.size() - before) / runs
    full.load(sleeping_rows(templates, sleepers, now - 2 * DAY, now - 1.5 * DAY, now), templates)
    full.settle()
    filled = time.perf_counter() - began
    note(f"{full.name}: filled in {filled:.0f} s; measuring")
    found = asyncio.run(measure({side: stores[side].url for side in SIDES}, rounds))
    return {
        **found,
        "bytes_per_finished_run": per_run,
        "fill_seconds": filled,
        # The fill's runs are evenly spread: this cut-off takes about its PRUNED oldest.
        "prune": asyncio.run(
            prune_hook(full.url, oldest + (newest - oldest) * min(PRUNED, runs // 2) / runs)
        ),
    }


def run_sqlite(runs: int, sleepers: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cairn-bench-scale-") as tmp:
        stores = {side: Sqlite(Path(tmp) / side) for side in SIDES}
        return run_store(stores, runs, sleepers, rounds)


def run_postgres(runs: int, sleepers: int, rounds: int) -> dict[str, Any]:
    reason = postgres.problem()
    if reason is not None:
        return {"skipped": reason}
    with (
        postgres.fresh_database() as empty,
        postgres.fresh_database() as base,
        postgres.fresh_database() as full,
    ):
        stores = {"empty": Postgres(empty), "base": Postgres(base), "full": Postgres(full)}
        return run_store(stores, runs, sleepers, rounds)


def table(report: dict[str, Any]) -> str:
    lines = [
        f"cairn at scale: {report['runs']:,} finished runs (12 history entries each) and "
        f"{report['sleepers']:,} sleeping runs,",
        f"beside a base of {BASE:,} finished runs and an empty database (median ms; goal: "
        f"within {TARGET}x of the base)",
        "",
    ]
    header = (
        f"{'store':<11} {'figure':<38} {'empty ms':>9} {'base ms':>8} {'full ms':>8} "
        f"{'full/base':>9} {'full/empty':>10}"
    )
    lines += [header, "-" * len(header)]
    for store, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        data = report[store]
        if "skipped" in data:
            lines.append(f"{label:<11} skipped: {data['skipped']}")
            continue
        for figure, base in data["base"].items():
            full = data["full"][figure]
            empty = data["empty"][figure]
            ratio = full / base
            mark = "" if ratio <= TARGET else "  over"
            lines.append(
                f"{label:<11} {figure:<38} {empty:>9.2f} {base:>8.2f} {full:>8.2f} "
                f"{ratio:>8.2f}x {full / empty:>9.2f}x{mark}"
            )
        lines.append(
            f"{label:<11} {'bytes on disk per finished run':<38} "
            f"{data['bytes_per_finished_run']:>9.0f}"
        )
        lines.append(f"{label:<11} {'prune throughput':<38} {data['prune']}")
        lines.append(f"{label:<11} {'fill (bulk SQL)':<38} {data['fill_seconds']:>8.0f}s")
    lines += [
        "",
        "base: a database of the same 4,000 newest finished runs alone (the fill's runs are",
        "older, as history is); empty: the 3 template runs and the runs the measuring itself",
        "starts (some 120 ten-step runs), so its filtered pages are all but empty: those",
        "figures price a short page, not a smaller database. The three are measured in turns;",
        "full/base is the goal's ratio. Pages are 50 runs; the",
        "dashboard figures are server time. SQLite has no statistics (cairn gathers none);",
        "PostgreSQL is VACUUM ANALYZEd after each load, as autovacuum would.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help="finished runs of the fill")
    parser.add_argument("--sleepers", type=int, default=SLEEPERS, help="sleeping runs of the fill")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per list")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="measure PostgreSQL only")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "runs": args.runs,
        "sleepers": args.sleepers,
        "sqlite": (
            {"skipped": "--no-sqlite"}
            if args.no_sqlite
            else run_sqlite(args.runs, args.sleepers, args.rounds)
        ),
        "postgres": (
            {"skipped": "--no-postgres"}
            if args.no_postgres
            else run_postgres(args.runs, args.sleepers, args.rounds)
        ),
    }
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
