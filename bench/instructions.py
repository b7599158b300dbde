"""`python -m bench.instructions`: machine instructions per step, counted by callgrind.

Wall and CPU time move by tens of percent on a shared machine; instruction counts do
not. This runs the same workload under `valgrind --tool=callgrind` twice, with no runs
and with RUNS runs, and prints the difference per step, so that start-up, imports and
the engine's opening cancel out:

    python -m bench.instructions [seq|conc] [RUNS] [--tree DIR] [--steady] [--empty]

`seq`: ten-step runs one after another; `conc`: batches of 200 at once (after a warm-up
batch). `--tree DIR` counts another checkout (its `src` first on the path), to compare
two versions in one sitting: alternate them, since the engine's timers still add a few
percent of noise between repeats. The engine's polls are slowed (poll_interval 60 s,
lease 600 s) so that background reads do not grow with valgrind's slow clock.

What still grows with wall time (valgrind's pace, and so the machine's load) moves the
count by a few percent between repeats: the look at the attempts in flight every 0.5 s,
the idle claimer's data_version poll every 50 ms, and background threads (the WAL
checkpointer, the heartbeat, the watchdog). `--steady` leaves those out, for comparing
two versions of the run path: the looks and polls are switched off and only the event
loop's thread is counted. Repeats then agree within about 0.3%.

`--empty` runs a workflow with no step instead and prints instructions per run: what a
run costs beside its steps (its start, its task, its finish).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile

STEPS = 10
BATCH = 200


async def workload(mode: str, runs: int, steady: bool = False, empty: bool = False) -> None:
    """What one counted process does: a warm-up, then `runs` ten-step (or empty) runs."""
    import cairn
    from bench.workflows import no_steps, ten_steps

    workflow = no_steps if empty else ten_steps

    if steady:
        from cairn.runtime import in_flight
        from cairn.store.sqlite.store import SqliteStore

        in_flight.LOOK = 1e9

        async def wait_for_work(self: SqliteStore, timeout: float) -> None:
            await self._signal.wait(timeout)  # this store's own writes only: no polls

        SqliteStore.wait_for_work = wait_for_work  # type: ignore[method-assign]

    async def batch(engine: cairn.Engine, count: int, first: int) -> None:
        handles = await asyncio.gather(*(engine.start(workflow, first + i) for i in range(count)))
        await asyncio.gather(*(handle.result() for handle in handles))

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.db"
        async with cairn.Engine(url, workers=BATCH, poll_interval=60, lease="600s") as engine:
            if mode == "conc":
                await batch(engine, 100, 0)
                for done in range(0, runs, BATCH):
                    await batch(engine, min(BATCH, runs - done), 10_000 + done)
            else:
                for i in range(30):
                    await (await engine.start(workflow, i)).result()
                for i in range(runs):
                    await (await engine.start(workflow, 10_000 + i)).result()


def count(tree: str, mode: str, runs: int, steady: bool = False, empty: bool = False) -> int:
    """Instructions of one process of `workload(mode, runs)` from checkout `tree`."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        # Steady: this checkout's workload (`--steady` is its own) on `tree`'s cairn.
        bench_from = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = f"{tree}/src:{bench_from if steady else tree}"
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=path)
        # Bytecode compiled beforehand: a .pyc written during the count would be counted.
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/src"], check=True)
        run = f"b.workload({mode!r}, {runs}, {steady}, {empty})"
        code = f"import asyncio, bench.instructions as b; asyncio.run({run})"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        if steady:
            valgrind.append("--separate-threads=yes")  # one file per thread: "-01" the main's
        subprocess.run(
            [*valgrind, sys.executable, "-c", code],
            env=env,
            check=True,
            capture_output=True,
        )
        return callgrind_total(f"{out}-01" if steady else out)


def callgrind_total(path: str) -> int:
    """The instructions a callgrind output file counts in all."""
    with open(path, encoding="utf-8") as counted:
        for line in counted:
            found = re.match(r"^(?:summary|totals):\s+(\d+)", line)
            if found:
                return int(found[1])
    raise RuntimeError(f"callgrind wrote no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("seq", "conc"), default="seq")
    parser.add_argument("runs", nargs="?", type=int, default=200)
    parser.add_argument("--tree", default=os.getcwd(), help="the checkout to count")
    parser.add_argument(
        "--steady",
        action="store_true",
        help="leave out what grows with wall time: polls, looks, background threads",
    )
    parser.add_argument(
        "--empty", action="store_true", help="runs with no step, instructions per run"
    )
    args = parser.parse_args()
    base = count(args.tree, args.mode, 0, args.steady, args.empty)
    total = count(args.tree, args.mode, args.runs, args.steady, args.empty)
    unit, per = ("run", args.runs) if args.empty else ("step", args.runs * STEPS)
    steady = ", steady" if args.steady else ""
    print(
        f"{args.tree} {args.mode}: {(total - base) / per:,.0f} instructions per {unit}"
        f" ({args.runs} runs{steady})"
    )


if __name__ == "__main__":
    main()
