"""One workflow module, unchanged: served by a `cairn worker` process and as a Lambda handler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import needs_sdk

needs_sdk()

import cairn
import cairn.aws

from . import flows
from .conftest import result_of

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(cairn.__file__).resolve().parents[1]


@pytest.mark.process
async def test_same_module__a_cairn_worker_and_a_lambda_handler_give_the_same_result(
    tmp_path, lambda_runner
):
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(ROOT)])
    async with cairn.Engine(url, workers=0) as engine:  # starts runs, executes none
        worker = subprocess.Popen(
            [sys.executable, "-m", "cairn", "worker", "-m", "tests.aws.flows", "--db", url],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            run = await engine.start(flows.parent, 2)
            on_worker = await run.result(timeout=60)
        finally:
            worker.terminate()
            _, stderr = worker.communicate(timeout=30)
    assert flows.calls["add"] == 0, "the worker process ran the steps, not this one"
    outcome = lambda_runner(cairn.aws.handler(flows.parent)).run(
        input=json.dumps({"n": 2}), execution_timeout=60
    )
    assert on_worker == result_of(outcome) == [4, 5, 6], stderr
