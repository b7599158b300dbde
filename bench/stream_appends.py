"""`python -m bench.stream_appends [--tree DIR]`: what one stream append costs each store.

Counts, not times (the machine is shared): on PostgreSQL, the index scans and the shared
buffers one append of one item reads (EXPLAIN (ANALYZE, BUFFERS), rolled back, on a
stream of ITEMS items); on SQLite, the instructions of an append, counted by callgrind
over APPENDS appends minus none (the whole write path: the store's Python and SQLite).
`--tree DIR` counts another checkout's `src` (e.g. `git archive main src | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from bench import postgres
from bench.instructions import callgrind_total

VALGRIND = ("valgrind", "--tool=callgrind")

ITEMS = 100
APPENDS = 2000


def _run(run_id: str) -> Any:
    from cairn.store.records import RunRecord

    return RunRecord(
        run_id=run_id,
        status="RUNNING",
        owner="w1",
        workflow="bench.flow",
        args='{"args": [], "kwargs": {}}',
        created_at=1.0,
        updated_at=1.0,
        attempt=1,
        started_at=1.0,
        fence=1,
    )


def _append(run_id: str, base: int) -> Any:
    from cairn.store.programs import streams
    from cairn.store.records import Lease

    return streams.append_stream(
        Lease("w1", 1),
        run_id,
        "tokens",
        [("chunk", '"t"')],
        step_key="s#1",
        attempt=1,
        claim=1,
        base=base,
        now=2.0,
    )


async def appends(url: str, count: int) -> None:
    """One run, and `count` appends of one item each to its stream."""
    from cairn.store import open_store
    from cairn.store.programs import runs

    store = open_store(url)
    await store.open()
    try:
        await store.write(runs.create_run(_run("r1")))
        for base in range(count):
            await store.write(_append("r1", base))
    finally:
        await store.close()


async def explained(url: str) -> dict[str, int]:
    """Index scans and shared buffers of the next append to a stream of ITEMS items."""
    import psycopg

    from cairn.store.postgres import dialect

    await appends(url, ITEMS)
    program = _append("r1", ITEMS)()
    request = next(program)
    [(text, params)] = dialect.program_statements(request.text, request.params, lock="")
    async with await psycopg.AsyncConnection.connect(url) as conn:
        explain = await conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {text}", params)
        [[[plan]]] = await explain.fetchall()
        await conn.rollback()
    nodes = []
    todo = [plan["Plan"]]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo.extend(node.get("Plans", ()))
    scans = sum(1 for node in nodes if node["Node Type"].startswith("Index"))
    return {"index scans": scans, "shared buffers": int(plan["Plan"]["Shared Hit Blocks"])}


def count(tree: str, n: int) -> int:
    """Instructions of one process of `appends` (SQLite) with checkout `tree`'s cairn."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=f"{tree}/src:{here}")
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{tree}/src"], check=True)
        url = f"sqlite:///{folder}/bench.db"
        code = f"import asyncio, bench.stream_appends as b; asyncio.run(b.appends({url!r}, {n}))"
        subprocess.run(
            [*VALGRIND, f"--callgrind-out-file={out}", sys.executable, "-c", code],
            env=env,
            check=True,
            capture_output=True,
        )
        return callgrind_total(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=os.getcwd(), help="the checkout to count")
    args = parser.parse_args()
    if (problem := postgres.problem()) is None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=f"{args.tree}/src:{here}")
        with postgres.fresh_database() as url:
            run = f"asyncio.run(b.explained({url!r}))"
            code = f"import asyncio, json, bench.stream_appends as b; print(json.dumps({run}))"
            shown = subprocess.run(
                [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
            )
        found = json.loads(shown.stdout)
        print(f"{args.tree} postgresql: an append to a stream of {ITEMS} items: {found}")
    else:
        print(f"bench.stream_appends: no PostgreSQL half: {problem}")
    per = (count(args.tree, APPENDS) - count(args.tree, 0)) / APPENDS
    print(f"{args.tree} sqlite: {per:,.0f} instructions per append ({APPENDS} appends)")


if __name__ == "__main__":
    main()
