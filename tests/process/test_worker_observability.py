"""`cairn worker --log-format json` and `--metrics-port`: real worker processes."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn

pytestmark = pytest.mark.process

SRC = Path(cairn.__file__).resolve().parents[1]
TIMEOUT = 30.0

FLOWS = """
import logging

import cairn

log = logging.getLogger("obsflows")


@cairn.step()
async def greet(name):
    log.warning("hello %s", name)
    return f"hello {name}"


@cairn.workflow(name="obs.greet")
async def greeting(name: str) -> str:
    return await greet(name)
"""


class Worker:
    """A `cairn worker` subprocess whose stderr lines can be awaited."""

    def __init__(self, project: Path, url: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(project)])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", "worker", "-m", "obsflows", "--db", url, *args],
            cwd=project,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str) -> str:
        while True:
            line = self.lines.get(timeout=TIMEOUT)
            assert line is not None, f"worker exited before logging {text!r}: {self.log}"
            self.log.append(line)
            if text in line:
                return line

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=TIMEOUT)
        while (line := self.lines.get(timeout=TIMEOUT)) is not None:
            self.log.append(line)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.pump.join(timeout=TIMEOUT)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "obsflows.py").write_text(FLOWS)
    return tmp_path


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def test_worker__json_logs_carry_the_run_context(project: Path, workers: list[Worker]) -> None:
    url = f"sqlite:///{project / 'cairn.db'}"
    with cairn.Client(url) as client:
        run_id = client.start("obs.greet", "ann").run_id

    worker = Worker(project, url, "--log-format", "json")
    workers.append(worker)
    worker.wait_for(f"run {run_id} COMPLETED")
    assert worker.terminate() == 0

    records = [json.loads(line) for line in worker.log]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    mine = [r for r in records if r["run_id"] == run_id]
    hello = next(r for r in mine if r["logger"] == "obsflows")
    assert hello == {
        "time": hello["time"],
        "level": "WARNING",
        "logger": "obsflows",
        "message": "hello ann",
        "run_id": run_id,
        "workflow": "obs.greet",
        "step": "greet#1",
        "attempt": 1,
    }
    assert [r["message"] for r in mine if r["logger"] == "cairn.worker"] == [
        f"run {run_id} (obs.greet) started, attempt 1",
        f"run {run_id} COMPLETED",
    ]
    ready = next(r for r in records if r["message"].endswith(" ready"))
    assert ready["run_id"] is None
