"""The demo behind `make demo`: an order survives `kill -9` and nothing runs twice.

1. Process 1 starts order o-1001 (examples/orders.py) on an embedded SQLite database.
2. While it is posting the letter (after the card charge has been committed), the demo
   kills it with SIGKILL: no clean-up, no exception handler, nothing.
3. Process 2 runs the same command. Its engine sees that process 1 is dead, takes the run
   over and resumes it at send_letter, replaying the two completed steps from the database.
4. The run's history and a verdict from the side-effect log show each step completed once.

Everything lives in ./demo-data (reset on every run). Synchronisation is on the
side-effect log, never on sleeps.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "demo-data"
DB_FILE = DATA / "cairn.db"
URL = f"sqlite:///{DB_FILE}"
LOG = DATA / "effects.log"
ORDER = "o-1001"
RUN_ID = f"order-{ORDER}"
STEPS = ("reserve_stock", "charge_card", "send_letter")
LETTER = float(os.environ.get("ORDERS_LETTER_SECONDS", "1.0"))


def heading(text: str) -> None:
    print(f"\n== {text}", flush=True)


def effects() -> list[dict[str, Any]]:
    if not LOG.exists():
        return []
    with LOG.open(encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.endswith("\n")]


def reset() -> None:
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir()
    (DATA / ".gitignore").write_text("*\n", encoding="utf-8")


def spawn(report: Path) -> tuple[subprocess.Popen[bytes], float]:
    command = [
        sys.executable,
        "-u",
        "-m",
        "examples.orders",
        ORDER,
        "--db",
        URL,
        "--report",
        str(report),
    ]
    env = {**os.environ, "ORDERS_LOG": str(LOG)}
    env.pop("CAIRN_DATABASE_URL", None)
    env.pop("CAIRN_MODULES", None)
    print(f"$ python -m examples.orders {ORDER} --db sqlite:///demo-data/cairn.db", flush=True)
    spawned_at = time.time()
    return subprocess.Popen(command, cwd=ROOT, env=env), spawned_at


def wait_for_effect(process: subprocess.Popen[bytes], step: str, event: str) -> dict[str, Any]:
    """Block until the child logs `step`/`event`; fail if it exits first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in effects():
            if line["pid"] == process.pid and line["step"] == step and line["event"] == event:
                return line
        if process.poll() is not None:
            raise SystemExit(f"demo: process {process.pid} exited before {step} {event}")
        time.sleep(0.005)  # polling the log file, not waiting for time to pass
    process.kill()
    raise SystemExit(f"demo: process {process.pid} never logged {step} {event}")


async def history() -> tuple[str, list[Any]]:
    import cairn

    async with cairn.Engine(URL, workers=0) as engine:
        run = await engine.get(RUN_ID)
        return await run.status(), await engine.history(RUN_ID)


def cli_command() -> list[str] | None:
    """How to call the `cairn` command line, or None if it is not installed."""
    try:
        if importlib.util.find_spec("cairn.cli.main") is None:
            return None
    except ImportError:
        return None
    script = Path(sys.executable).with_name("cairn")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from cairn.cli.main import main; main()"]


def show_history() -> None:
    """Print the run's history with the CLI when it is installed, else with engine.history."""
    cli = cli_command()
    if cli is not None:
        print(f"$ cairn runs show {RUN_ID} --db sqlite:///demo-data/cairn.db", flush=True)
        shown = subprocess.run([*cli, "runs", "show", RUN_ID, "--db", URL], cwd=ROOT)
        if shown.returncode == 0:
            return
        print("(the cairn CLI failed; showing engine.history() instead)", flush=True)
    status, entries = asyncio.run(history())
    print(f"run {RUN_ID}: {status}  (from engine.history)")
    print(f"  {'seq':>3}  {'key':<16} {'status':<10} {'attempts':>8}  result")
    for entry in entries:
        result = json.dumps(entry.result, default=str)
        print(f"  {entry.seq:>3}  {entry.key:<16} {entry.status:<10} {entry.attempts:>8}  {result}")


def main() -> int:
    reset()
    print("cairn demo: an order workflow killed with SIGKILL mid-run, resumed by a new process")
    print(f"database: {URL} (fresh)\nside-effect log: {LOG.relative_to(ROOT)}")

    heading("process 1: start order o-1001")
    first, _ = spawn(DATA / "process1.json")
    wait_for_effect(first, "charge_card", "done")
    wait_for_effect(first, "send_letter", "start")
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_by_first = [e["step"] for e in effects() if e["pid"] == first.pid and e["event"] == "done"]
    print(
        f"process 1 (pid {first.pid}) killed with SIGKILL after: {', '.join(done_by_first)}"
        " (in the middle of send_letter)",
        flush=True,
    )
    status, entries = asyncio.run(history())
    recorded = ", ".join(
        f"{e.key} {e.status} ({e.attempts} attempt{'s' if e.attempts > 1 else ''})" for e in entries
    )
    print(f"the database holds: run {status} (its process is dead); {recorded or 'no steps'}")

    heading("process 2: the same command, in a fresh process")
    report = DATA / "process2.json"
    second, spawned_at = spawn(report)
    if second.wait() != 0:
        print(f"demo: process 2 exited with status {second.returncode}", file=sys.stderr)
        return 1
    timing = json.loads(report.read_text(encoding="utf-8"))
    mine = [e for e in effects() if e["pid"] == second.pid]
    skipped = [step for step in STEPS if not any(e["step"] == step for e in mine)]
    resumed = next(e for e in mine if e["event"] == "start")
    print(
        f"process 2 (pid {second.pid}) recovered run {RUN_ID} and resumed it at"
        f" {resumed['step']} {resumed['t'] - spawned_at:.2f} s after the process started;"
        f" skipped {len(skipped)} completed steps ({', '.join(skipped)})"
    )
    print(
        f"run completed {timing['done'] - spawned_at:.2f} s after process start"
        f" ({timing['done'] - timing['opening']:.2f} s after Engine open,"
        f" of which {LETTER:.1f} s is the slow letter)"
    )

    heading("history of the run")
    show_history()

    heading("verdict, from the side-effect log")
    log = effects()
    names = {first.pid: "process 1", second.pid: "process 2"}
    exactly_once = True
    for step in STEPS:
        done = [e for e in log if e["step"] == step and e["event"] == "done"]
        failed = [e for e in log if e["step"] == step and e["event"] == "failed"]
        killed = [
            e
            for e in log
            if e["step"] == step
            and e["event"] == "start"
            and e["pid"] == first.pid
            and not any(d["pid"] == first.pid for d in done)
        ]
        where = ", ".join(names.get(e["pid"], f"pid {e['pid']}") for e in done) or "never"
        notes = []
        if failed:
            notes.append(f"after {len(failed)} failed attempt(s) retried by cairn")
        if killed:
            notes.append("its attempt in process 1 was killed before finishing")
        note = f"; {'; '.join(notes)}" if notes else ""
        print(f"  {step:<14} completed {len(done)}x  ({where}{note})")
        exactly_once = exactly_once and len(done) == 1
    if exactly_once:
        print("VERDICT: each step completed exactly once across 2 processes and a kill -9.")
        if cli_command() is not None:
            script = Path(sys.executable).with_name("cairn")
            shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else "cairn"
            print(
                f"\nInspect it yourself: {shown} runs show {RUN_ID} --db sqlite:///demo-data/cairn.db"
            )
        return 0
    print("VERDICT: FAILED - a step did not complete exactly once (see the log above).")
    return 1


if __name__ == "__main__":
    sys.exit(main())
