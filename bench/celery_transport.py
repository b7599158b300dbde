"""`python -m bench.celery_transport [RUNS]`: runs/s through Celery beside cairn's own workers.

In one sitting, on one database kind at a time (SQLite; PostgreSQL when reachable), RUNS
ten-step runs (default 500) are started at once and awaited, executed by one worker
process: `cairn worker` (cairn's own transport: it polls the database), then `cairn
worker --transport celery` on RabbitMQ and on Redis (each when reachable). Runs/s counts
from the first start to the last result. Every worker has concurrency 32.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cairn
from bench import postgres

BROKERS = {
    "rabbitmq": ("amqp://guest:guest@127.0.0.1:5672//", 5672),
    "redis": ("redis://127.0.0.1:6379/12", 6379),
}
ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 32


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def reachable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def worker(url: str, broker: str | None, log: Path) -> Iterator[None]:
    """A worker process serving bench.workflows, ready when this yields."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    argv = [sys.executable, "-m", "cairn", "worker", "--db", url, "-m", "bench.workflows"]
    argv += ["--concurrency", str(CONCURRENCY)]
    if broker is not None:
        argv += ["--transport", "celery", "--broker", broker]
    ready = "cairn engine " if broker is not None else " ready"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=out)
        try:
            deadline = time.monotonic() + 60
            while ready not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker did not start: {log.read_text()[-2000:]}")
                time.sleep(0.05)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def runs_per_second(url: str, runs: int) -> float:
    with cairn.Client(url) as client:
        began = time.perf_counter()
        handles = [client.start("bench.ten_steps", i, allow_unknown=True) for i in range(runs)]
        for i, handle in enumerate(handles):
            assert handle.result(timeout=300) == i + 10
        return runs / (time.perf_counter() - began)


def transports() -> list[tuple[str, str | None]]:
    """(label, broker URL or None for cairn's own) of every transport measurable here."""
    found: list[tuple[str, str | None]] = [("cairn (polling)", None)]
    for name, (broker, port) in BROKERS.items():
        if reachable(port):
            found.append((f"celery ({name})", broker))
        else:
            note(f"{name} is not reachable on 127.0.0.1:{port}: its line is left out")
    return found


def _sqlite(runs: int, root: Path) -> list[tuple[str, str, float]]:
    rows = []
    for label, broker in transports():
        url = f"sqlite:///{root / f'bench-{len(rows)}.db'}"
        note(f"sqlite: {runs} runs through {label}")
        with worker(url, broker, root / f"sqlite-{len(rows)}.log"):
            rows.append(("sqlite", label, runs_per_second(url, runs)))
    return rows


def _measure(url: str, broker: str | None, log: Path, runs: int) -> float:
    with worker(url, broker, log):
        runs_per_second(url, 20)  # warm up (imports, prepared statements)
        return runs_per_second(url, runs)


def beside_own(
    runs: int, rounds: int, root: Path, *, postgres_too: bool = True
) -> dict[str, dict[str, Any]]:
    """Per store and broker: runs/s through Celery and through cairn's own worker.

    Each round measures cairn's own worker then each reachable broker, on a fresh
    database each, so every ratio compares figures taken minutes apart at most; the
    ratio reported is the median of the rounds' ratios.
    """
    brokers = [(label, url) for label, url in transports() if url is not None]
    stores: list[tuple[str, Callable[[], contextlib.AbstractContextManager[str]]]] = [
        ("sqlite", lambda: _sqlite_url(root))
    ]
    if postgres_too and postgres.problem() is None:
        stores.append(("postgres", postgres.fresh_database))
    report: dict[str, dict[str, Any]] = {}
    for kind, fresh in stores:
        own: list[float] = []
        through: dict[str, list[float]] = {label: [] for label, _ in brokers}
        for round_ in range(rounds):
            note(f"{kind}: round {round_ + 1}/{rounds}, {runs} runs through each transport")
            with fresh() as url:
                own.append(_measure(url, None, root / "own.log", runs))
            for label, broker in brokers:
                with fresh() as url:
                    through[label].append(_measure(url, broker, root / "celery.log", runs))
        report[kind] = {
            label: {
                "own_runs_per_second": own,
                "celery_runs_per_second": rates,
                "ratio": statistics.median(c / o for c, o in zip(rates, own, strict=True)),
            }
            for label, rates in through.items()
        }
    return report


@contextlib.contextmanager
def _sqlite_url(root: Path) -> Iterator[str]:
    path = root / f"transport-{uuid.uuid4().hex[:8]}.db"
    yield f"sqlite:///{path}"


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: RUNS (a positive count, default 500)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.celery_transport",
        description=(__doc__ or "").split("\n\n", 1)[-1],
    )
    parser.add_argument("runs", nargs="?", type=_positive, default=500, help="runs per transport")
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1 run, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    runs = arguments(argv).runs
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows += _sqlite(runs, root)
        problem = postgres.problem()
        if problem is None:
            rows += _postgres(runs, root)
        else:
            note(f"PostgreSQL left out: {problem}")
    print(f"{'store':<10} {'transport':<20} {'runs/s':>8}   ({runs} ten-step runs, 1 worker)")
    for kind, label, rate in rows:
        print(f"{kind:<10} {label:<20} {rate:>8.1f}")
    return 0


def _postgres(runs: int, root: Path) -> list[tuple[str, str, float]]:
    rows = []
    for label, broker in transports():
        with postgres.fresh_database() as url:
            note(f"postgres: {runs} runs through {label}")
            with worker(url, broker, root / f"postgres-{len(rows)}.log"):
                rows.append(("postgres", label, runs_per_second(url, runs)))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
