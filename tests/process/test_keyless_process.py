"""A worker process started without CAIRN_KEYS hands encrypted runs back, on both stores.

A keyed worker parks a run after a step and is killed; a keyless worker process is given
the woken run and time: the run is not failed and its stderr names the key once; a keyed
worker process then finishes it, the completed step not run again.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

import cairn

from .worker_procs import workers

pytestmark = pytest.mark.process

KEYS = "k1:" + base64.b64encode(b"\x01" * 32).decode()


async def test_keyless_worker_process__hands_the_run_back_for_a_keyed_one(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_KEYS", KEYS)  # the steering engine and the keyed workers
    async with workers(tmp_path, store_url) as (procs, control):
        first = procs.spawn()
        run = await control.start("proc.waiter", allow_unknown=True)
        await procs.status(control, run.run_id, "WAITING")
        procs.kill(first)
        assert (await control.control.record(run.run_id)).args.startswith("aesgcm:k1:")
        await control.send_event(run.run_id, "go", {"n": 1})
        await control.send_event(run.run_id, "go", {"n": 2})

        monkeypatch.delenv("CAIRN_KEYS")
        keyless = procs.spawn()
        assert keyless.stdout is not None
        await asyncio.to_thread(keyless.stdout.readline)  # "ready"
        await procs.until(
            "the keyless worker to take the run",
            lambda: _claimed_once(control, run.run_id),
        )
        await asyncio.sleep(1.0)  # time to fail it (the bug) or to spin on it
        record = await control.control.record(run.run_id)
        assert record.status != "FAILED", record.error
        keyless.kill()
        _, err = keyless.communicate(timeout=10)
        named = [line for line in err.splitlines() if "key 'k1'" in line and "handed back" in line]
        assert len(named) == 1, err[-3000:]
        assert "CAIRN_KEYS" in named[0]

        monkeypatch.setenv("CAIRN_KEYS", KEYS)
        procs.spawn()
        done = await procs.status(control, run.run_id, "COMPLETED", "FAILED")
        assert done.status == "COMPLETED", done.error
        assert await run.result(timeout=1) == [{"n": 1}, {"n": 2}]
    assert procs.counts() == {"before": 1, "after [{'n': 1}, {'n': 2}]": 1}


async def _claimed_once(control: cairn.Engine, run_id: str) -> bool:
    """True once a worker took the woken run (it was WAITING, due), or failed it."""
    record = await control.control.record(run_id)
    return record.status in ("RUNNING", "PENDING", "FAILED") or record.attempt >= 2
