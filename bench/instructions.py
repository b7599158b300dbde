"""`python -m bench.instructions`: machine instructions per step, counted by callgrind.

Wall and CPU time move by tens of percent on a shared machine; instruction counts do
not. This runs the same workload under `valgrind --tool=callgrind` twice, with no runs
and with RUNS runs, and prints the difference per step, so that start-up, imports and
the engine's opening cancel out:

    python -m bench.instructions [seq|conc] [RUNS] [--tree DIR]

`seq`: ten-step runs one after another; `conc`: batches of 200 at once (after a warm-up
batch). `--tree DIR` counts another checkout (its `src` first on the path), to compare
two versions in one sitting: alternate them, since the engine's timers still add a few
percent of noise between repeats. The engine's polls are slowed (poll_interval 60 s,
lease 600 s) so that background reads do not grow with valgrind's slow clock.
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


async def workload(mode: str, runs: int) -> None:
    """What one counted process does: a warm-up, then `runs` ten-step runs."""
    import cairn
    from bench.workflows import ten_steps

    async def batch(engine: cairn.Engine, count: int, first: int) -> None:
        handles = await asyncio.gather(*(engine.start(ten_steps, first + i) for i in range(count)))
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
                    await (await engine.start(ten_steps, i)).result()
                for i in range(runs):
                    await (await engine.start(ten_steps, 10_000 + i)).result()


def count(tree: str, mode: str, runs: int) -> int:
    """Instructions of one process of `workload(mode, runs)` from checkout `tree`."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=f"{tree}/src:{tree}")
        # Bytecode compiled beforehand: a .pyc written during the count would be counted.
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/src"], check=True)
        code = f"import asyncio, bench.instructions as b; asyncio.run(b.workload({mode!r}, {runs}))"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        subprocess.run(
            [*valgrind, sys.executable, "-c", code],
            env=env,
            check=True,
            capture_output=True,
        )
        with open(out, encoding="utf-8") as counted:
            for line in counted:
                found = re.match(r"^(?:summary|totals):\s+(\d+)", line)
                if found:
                    return int(found[1])
    raise RuntimeError("callgrind wrote no totals")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("seq", "conc"), default="seq")
    parser.add_argument("runs", nargs="?", type=int, default=200)
    parser.add_argument("--tree", default=os.getcwd(), help="the checkout to count")
    args = parser.parse_args()
    base = count(args.tree, args.mode, 0)
    total = count(args.tree, args.mode, args.runs)
    per_step = (total - base) / (args.runs * STEPS)
    print(f"{args.tree} {args.mode}: {per_step:,.0f} instructions per step ({args.runs} runs)")


if __name__ == "__main__":
    main()
