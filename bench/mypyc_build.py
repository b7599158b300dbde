"""`python -m bench.mypyc_build DIR`: the step path compiled with mypyc, beside it pure.

An experiment, not a build of cairn (see bench/MYPYC.md for what it found). Copies `src/`
to DIR/pure/src and DIR/compiled/src, compiles the modules of HOT in the second in place
(a .so beside each .py, as `setup.py build_ext --inplace` leaves them) and prints the
commands that compare the two. `--measure` also runs them, alternating: CPU per step
(`bench.cpu_per_step`, 3 pairs) and, where valgrind is installed, instructions per step
from callgrind (100 sequential ten-step runs after 20 warm-up ones, less a run of the
warm-up alone). Needs mypy (a dev dependency; it ships mypyc), setuptools (which a
Python 3.12+ venv lacks: `.venv/bin/pip install setuptools`), a C compiler and the Python
headers.

`python -m bench.mypyc_build --runs N` is the workload callgrind counts.

The store's programs (store/programs/) are left out: their declarations (`@wakes`,
`@single_write`, `@path`, `@one_plan`) keyed on `fn.__code__` and a generator's
`gi_code` when this was measured (MYPYC.md); they are now read from the operation, but
compiling them has not been tried.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The modules a step passes through (cProfile of bench.cpu_per_step), less the programs.
# authoring/definitions.py is out too: mypyc cannot compile a Generic dataclass
# (mypyc/mypyc#827: "attribute '__dict__' of 'type' objects is not writable" at import).
# store/sqlite/directory.py is in because it subclasses SqliteStore, and an interpreted
# class cannot inherit from a compiled one.
HOT = [
    "cairn/core/live_steps.py",
    "cairn/core/attempts.py",
    "cairn/core/executor.py",
    "cairn/core/journal.py",
    "cairn/core/live_attempt.py",
    "cairn/store/sqlite/store.py",
    "cairn/store/sqlite/connections.py",
    "cairn/store/sqlite/directory.py",
    "cairn/store/_sql/rows.py",
    "cairn/serialization/serializers.py",
    "cairn/limits.py",
    "cairn/blobs/offloaded.py",
    "cairn/codecs/coded.py",
    "cairn/runtime/executing.py",
]

BUILD = """
from setuptools import setup
from mypyc.build import mypycify

setup(name="cairn-mypyc-bench", ext_modules=mypycify({modules!r}, opt_level="3"),
      script_args=["build_ext", "--inplace"])
"""


def build(into: Path) -> None:
    """Copy src/ twice into `into` and compile HOT in the `compiled` copy."""
    for name in ("pure", "compiled"):
        shutil.rmtree(into / name, ignore_errors=True)
        shutil.copytree(ROOT / "src", into / name / "src")
    src = into / "compiled" / "src"
    (src / "mypyc_setup.py").write_text(BUILD.format(modules=HOT))
    subprocess.run([sys.executable, "mypyc_setup.py"], cwd=src, check=True)


def python(tree: Path, *args: str) -> str:
    """Run `python args` with `tree`'s src first on the path; its output."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout + done.stderr


def instructions(tree: Path, runs: int) -> int:
    """Instructions callgrind counts (all threads) for the `--runs` workload in `tree`."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{ROOT}"}
    with tempfile.TemporaryDirectory() as folder:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/cg.out"]
        command += [sys.executable, "-m", "bench.mypyc_build", "--runs", str(runs)]
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or found is None:
        raise SystemExit(done.stderr)
    return int(found.group(1))


def measure(into: Path) -> None:
    trees = [into / "pure", into / "compiled"]
    for _ in range(3):
        for tree in trees:
            print(f"{tree.name:9}", python(tree, "-m", "bench.cpu_per_step").strip(), flush=True)
    if shutil.which("valgrind") is None:
        return
    for tree in trees:
        per_step = (instructions(tree, 100) - instructions(tree, 0)) / 1000
        print(f"{tree.name:9} callgrind: {per_step:,.0f} instructions per step", flush=True)


async def sequential(runs: int) -> None:
    """20 warm-up ten-step runs, then `runs` more, one after another, on SQLite."""
    import cairn
    from bench.workflows import ten_steps

    with tempfile.TemporaryDirectory() as folder:
        async with cairn.Engine(f"sqlite:///{folder}/bench.db") as engine:
            for i in range(20 + runs):
                await (await engine.start(ten_steps, i)).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("into", nargs="?", type=Path, help="where to put the two trees")
    parser.add_argument("--measure", action="store_true", help="also run the comparison")
    parser.add_argument("--runs", type=int, help="only run the callgrind workload")
    args = parser.parse_args()
    if args.runs is not None:
        asyncio.run(sequential(args.runs))
        return
    if args.into is None:
        parser.error("name a folder for the two trees")
    into = args.into.resolve()
    build(into)
    for tree in (into / "pure", into / "compiled"):
        print(f"PYTHONPATH={tree / 'src'}:. python -m bench.cpu_per_step")
        print(f"PYTHONPATH={tree / 'src'}:. python -m bench --no-postgres")
    if args.measure:
        measure(into)


if __name__ == "__main__":
    main()
