"""`python -m bench.withdrawals [N ...] [--tree DIR]`: instructions per write withdrawn.

PostgreSQL's group commit withdraws a queued write whose caller gave up (is cancelled:
a mass cancel, a worker stopping with many runs). Here N writes queue behind two lanes
held busy and are all cancelled at once, in random order; callgrind counts the process
with N and with none, and the difference over N is the cost of one write queued and
withdrawn. It stays the same as N grows if withdrawing is linear, and grows with N if
each withdrawal searches the queue. Each N also checks that no cancelled write landed.
`--tree DIR` counts another checkout's `src` (`git archive main src | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable

from bench import postgres
from bench.instructions import callgrind_total

VALGRIND = ("valgrind", "--tool=callgrind")

SIZES = (1000, 16000)


async def workload(url: str, n: int) -> None:
    """Queue n writes behind two held lanes, cancel them all at once, check none landed."""
    from cairn.store.postgres.store import PostgresStore
    from cairn.store.programs import workers
    from cairn.store.records import WorkerRecord

    def register(name: str) -> Awaitable[None]:
        now = time.time()
        return store.write(workers.register_worker(WorkerRecord(name, "host", 1, now, now)))

    store = PostgresStore(url)
    await store.open()
    try:
        writer = store._writer
        assert writer is not None
        for lock in writer._locks:
            await lock.acquire()  # both lanes busy: every write queues
        tasks = [asyncio.ensure_future(register(f"w{i}")) for i in range(n)]
        while len(writer._queue) < n:
            await asyncio.sleep(0)
        # In no particular order, as runs cancelled from outside (a mass cancel) would be.
        for task in random.Random(7).sample(tasks, len(tasks)):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for lock in writer._locks:
            lock.release()
        await register("after")
        found = await store.read(workers.list_workers())
        assert [w.worker_id for w in found] == ["after"], (
            f"{len(found) - 1} cancelled writes landed"
        )
    finally:
        await store.close()


def count(tree: str, n: int) -> int:
    """Instructions of one process of `workload(n)` with checkout `tree`'s cairn."""
    with tempfile.TemporaryDirectory() as folder, postgres.fresh_database() as url:
        out = os.path.join(folder, "callgrind.out")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=f"{tree}/src:{here}")
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/src"], check=True)
        code = f"import asyncio, bench.withdrawals as b; asyncio.run(b.workload({url!r}, {n}))"
        subprocess.run(
            [*VALGRIND, f"--callgrind-out-file={out}", sys.executable, "-c", code],
            env=env,
            check=True,
            capture_output=True,
        )
        return callgrind_total(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--tree", default=os.getcwd(), help="the checkout to count")
    args = parser.parse_args()
    if (problem := postgres.problem()) is not None:
        sys.exit(f"bench.withdrawals: {problem}")
    base = count(args.tree, 0)
    for n in args.sizes:
        per = (count(args.tree, n) - base) / n
        print(f"{args.tree}: {n:>6,} writes cancelled at once: {per:>10,.0f} instructions each")


if __name__ == "__main__":
    main()
