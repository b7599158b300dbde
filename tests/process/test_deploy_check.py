"""A deploy, end to end: runs parked under v1, `cairn check --db` from v2, workers on v2.

Three folders hold three versions of one module `shop`; each command imports the one in
its working directory, as a deployment would.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cairn

from .test_cli import TIMEOUT, _env, cairn_cmd

pytestmark = pytest.mark.process

V1 = """
import cairn

@cairn.step(name="reserve")
async def reserve(order):
    return f"reserved {order}"

@cairn.step(name="charge")
async def charge(order):
    return f"charged {order}"

@cairn.step(name="ship")
async def ship(order):
    return f"shipped {order}"

@cairn.workflow(name="shop.order", version="v1")
async def order(order_id: str) -> list:
    done = [await reserve(order_id), await charge(order_id)]
    await cairn.wait_for_event("go")
    return [*done, await ship(order_id)]
"""

# The guarded change: runs that already charged keep doing so; new runs bill.
V2 = (
    V1.replace('version="v1"', 'version="v2"')
    .replace(
        "    done = [await reserve(order_id), await charge(order_id)]",
        "    first = await reserve(order_id)\n"
        '    if cairn.patched("bill"):\n'
        "        done = [first, await bill(order_id)]\n"
        "    else:\n"
        "        done = [first, await charge(order_id)]",
    )
    .replace(
        '@cairn.workflow(name="shop.order"',
        '@cairn.step(name="bill")\nasync def bill(order):\n    return f"billed {order}"\n\n'
        '@cairn.workflow(name="shop.order"',
    )
)

# The same change made carelessly: every parked run would diverge.
V2_UNGUARDED = V1.replace("await charge(order_id)]", "await ship(order_id)]")


@pytest.fixture
def versions(tmp_path: Path) -> dict[str, Path]:
    found = {}
    for name, text in {"v1": V1, "v2": V2, "bad": V2_UNGUARDED}.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "shop.py").write_text(text)
        found[name] = folder
    return found


def test_deploy__check_gates_the_change_and_v2_workers_finish_the_runs(
    versions: dict[str, Path], store_url: str
) -> None:
    db = ["--db", store_url]
    for n in range(3):
        parked = cairn_cmd(
            versions["v1"], "run", "shop:order", f"o-{n}", "--run-id", f"o-{n}", "-m", "shop", *db
        )
        assert parked.returncode == 0, parked.stderr
        assert "WAITING" in parked.stderr

    bad = cairn_cmd(versions["bad"], "check", "-m", "shop", *db)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "shop.order (version v1): 3 unfinished, 0 replay cleanly, 3 diverge" in bad.stdout
    assert "run o-0 at seq 2: code started step 'ship#1', history has step 'charge#1'" in (
        " ".join(bad.stdout.split())
    )
    assert bad.stderr.startswith("error: 3 of 3 unfinished runs would diverge")
    listed = json.loads(cairn_cmd(versions["bad"], "check", "-m", "shop", "--json", *db).stdout)
    assert listed["modules"] == ["shop"]  # what the modules register, as without --db
    report = listed["replay"]
    assert report["ok"] is False and report["diverged"] == 3

    good = cairn_cmd(versions["v2"], "check", "-m", "shop", *db)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "3 unfinished, 3 replay cleanly" in good.stdout
    assert "patch 'bill': 3 unfinished runs predate it" in good.stdout
    sample = json.loads(
        cairn_cmd(versions["v2"], "check", "-m", "shop", "--json", "--sample", "1", *db).stdout
    )["replay"]
    assert sample["runs"] == 1 and sample["ok"] is True

    # The database-less check still works and opens nothing.
    plain = cairn_cmd(versions["v2"], "check", "-m", "shop")
    assert plain.returncode == 0 and not (versions["v2"] / "cairn.db").exists()

    worker = subprocess.Popen(
        [sys.executable, "-m", "cairn", "worker", "-m", "shop", *db],
        cwd=versions["v2"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for n in range(3):
            sent = cairn_cmd(versions["v2"], "send", f"o-{n}", "go", *db)
            assert sent.returncode == 0, sent.stderr
        results = asyncio.run(_results(store_url, [f"o-{n}" for n in range(3)]))
    finally:
        worker.terminate()
        worker.wait(timeout=TIMEOUT)
    assert results == [[f"reserved o-{n}", f"charged o-{n}", f"shipped o-{n}"] for n in range(3)]
    done = cairn_cmd(versions["v2"], "check", "-m", "shop", *db)
    assert "no unfinished runs" in done.stdout


async def _results(url: str, run_ids: list[str]) -> list[object]:
    deadline = time.monotonic() + TIMEOUT
    async with cairn.Engine(url, workers=0) as engine:
        out = []
        for run_id in run_ids:
            handle = await engine.get(run_id)
            out.append(await handle.result(timeout=max(0.1, deadline - time.monotonic())))
        return out
