"""`python -m bench.cpu_per_step`: CPU time per step of ten-step runs, one after another.

CPU time (time.process_time) rather than wall time, so that a loaded machine (a test
suite running beside it) moves the figure less: it prices the Python a step costs, which
is what a refactor can change. Prints the best and the median of 5 rounds of 200 runs,
in µs per step, on SQLite. To compare two checkouts in one sitting, run it from each with
`PYTHONPATH=<checkout>/src`, alternating.
"""

from __future__ import annotations

import asyncio
import tempfile
import time

import cairn
from bench.workflows import ten_steps

ROUNDS = 5
RUNS = 200
STEPS = 10


async def measure() -> list[float]:
    """µs of CPU per step, one figure per round."""
    with tempfile.TemporaryDirectory() as folder:
        async with cairn.Engine(f"sqlite:///{folder}/bench.db") as engine:
            for i in range(50):  # warm up: imports, statement caches, the claim loop
                await (await engine.start(ten_steps, i)).result()
            figures = []
            for round_ in range(ROUNDS):
                started = time.process_time()
                for i in range(RUNS):
                    await (await engine.start(ten_steps, 1000 * (round_ + 1) + i)).result()
                figures.append((time.process_time() - started) / (RUNS * STEPS) * 1e6)
            return figures


def main() -> None:
    figures = sorted(asyncio.run(measure()))
    print(f"CPU per step: best {figures[0]:.1f} µs, median {figures[len(figures) // 2]:.1f} µs")


if __name__ == "__main__":
    main()
