"""A worker process waiting for a bucket away to give back a value, cancelled from outside.

Both stores, moto's S3 server stopped under a real worker process: the cancel sent by
another process ends the run CANCELLED while the bucket is still away, its cleanup run
once in the worker, and the payload it took kept in its history.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.engine.moto_server import MotoS3, started
from tests.engine.seeds import until

import cairn
from cairn.blobs import reference

from .test_cli import _env

pytestmark = pytest.mark.process

SCRIPT = Path(__file__).with_name("blob_reader.py")
WAIT = 30.0
PROMPT = 3.0  # seconds from the cancel to CANCELLED: within the 2 s back-off's reach
BIG = 5000


@pytest.fixture
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto's own retries only slow the test
    yield from started(monkeypatch)


def test_blob_read_cancel__a_worker_process_ends_the_run_while_the_bucket_is_away(
    store_url: str, moto_s3: MotoS3
) -> None:
    worker = subprocess.Popen(
        [sys.executable, str(SCRIPT), store_url, moto_s3.url],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready", worker.stderr
        took = asyncio.run(_cancelled_meanwhile(store_url, moto_s3))
    finally:
        worker.kill()
        out, err = worker.communicate(timeout=10)
    assert took < PROMPT, took
    assert out.split() == ["cleanup"], err  # the cleanup ran once, in the worker
    assert "Traceback" not in err, err


async def _cancelled_meanwhile(url: str, moto_s3: MotoS3) -> float:
    """Park the run, take the payload with the bucket away, cancel; seconds to CANCELLED."""
    options = {"blobs": moto_s3.url, "inline_limit": "1KiB", "workers": 0}
    async with cairn.Engine(url, **options) as eng:
        run = await eng.start("blobread.taken", run_id="blob-read-cancel")
        await until(eng, run.run_id, "WAITING")
        await eng.send_event(run.run_id, "data", "d" * BIG)  # queued: it waits for "go"
        moto_s3.stop()
        try:
            await eng.send_event(run.run_id, "go", None)
            async with asyncio.timeout(WAIT):
                while not ((await eng.control.record(run.run_id)).waiting_for or "").startswith(
                    reference.WAITING + reference.READING
                ):
                    await asyncio.sleep(0.02)
            began = time.monotonic()
            await run.cancel()
            record = await until(eng, run.run_id, "CANCELLED", "FAILED", "COMPLETED")
            took = time.monotonic() - began
            assert record.status == "CANCELLED", record.error
            history = await eng.history(run.run_id)
        finally:
            moto_s3.start()
        [data] = [entry for entry in history if entry.key == "~event:data#1"]
        assert data.status == "completed"
        [data] = [e for e in await eng.history(run.run_id) if e.key == "~event:data#1"]
        assert data.result["offloaded"]["preview"].startswith('"ddd')
    return took
