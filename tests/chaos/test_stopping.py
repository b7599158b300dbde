"""Stopping `cairn worker` (SIGINT, SIGTERM) while its PostgreSQL database does not answer.

docs/howto/workers.md promises that a worker stops within its grace, with a few seconds
to hand its runs back, and at once on a second signal: a supervisor's SIGKILL comes
next. These scenarios run a real `cairn worker` through a FreezingProxy with a run in
flight, and time its exit when the database hangs (connections open and new ones alike),
is gone (every connection reset and refused), or hung and came back just before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from tests.chaos.harness import ROOT
from tests.chaos.proxy import FreezingProxy
from tests.chaos.signalled import SignalledProcess

import cairn
from cairn.runtime.worker import HAND_BACK, HURRIED

pytestmark = [pytest.mark.process, pytest.mark.timeout(180)]

GRACE = 2.0
# Besides the grace and the hand-back window: cancelling the loops, closing the pool,
# and the interpreter's exit on a loaded machine.
SLACK = 4.0


class Serving(SignalledProcess):
    """A `cairn worker` through the proxy, executing one run inside a long step."""

    def __init__(self, root: Path, pg_url: str, proxy: FreezingProxy, grace: float) -> None:
        self.root = root
        self.pg_url = pg_url
        env = {
            **os.environ,
            "CAIRN_SIDE_DIR": str(root / "side"),
            "CAIRN_STEP_DELAY": "600",  # the step is in flight whenever the signal comes
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        }
        env.pop("CAIRN_DATABASE_URL", None)
        with cairn.Client(pg_url) as client:
            from tests.chaos import flow

            self.run_id = client.start(flow.ten_effects, 0).run_id
        self.log = root / "worker.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cairn",
                    "worker",
                    "--db",
                    proxy.url(pg_url.rsplit("/", 1)[1]),
                    "-m",
                    "tests.chaos.flow",
                    "--lease",
                    "10s",
                    "--grace",
                    f"{grace:g}s",
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        side = root / "side"
        deadline = time.monotonic() + 60
        while not (side.is_dir() and any(side.iterdir())):  # the step has started
            assert self.proc.poll() is None and time.monotonic() < deadline, self.text()
            time.sleep(0.05)

    def owner(self) -> tuple[str, str | None]:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT status, owner FROM runs WHERE run_id = %s", (self.run_id,)
            ).fetchone()
        assert row is not None
        return row[0], row[1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stop__database_frozen_exits_within_grace_and_hand_back(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy, sig: signal.Signals
) -> None:
    serving = Serving(tmp_path, pg_url, freezing, GRACE)
    freezing.freeze(new=True)  # a hung middlebox: nothing answers, nothing fails
    time.sleep(1.0)
    took = serving.stop(sig)
    log = serving.text()
    assert serving.proc.returncode == 0, log
    assert took < GRACE + HAND_BACK + SLACK, f"{took:.1f} s\n{log}"
    assert "stopped without handing its runs back" in log, log


def test_stop__database_down_exits_within_grace_and_hand_back(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    serving = Serving(tmp_path, pg_url, freezing, GRACE)
    freezing.reset()
    freezing.close()  # refused from now on
    time.sleep(1.0)
    took = serving.stop(signal.SIGINT)
    log = serving.text()
    assert serving.proc.returncode == 0, log
    assert took < GRACE + HAND_BACK + SLACK, f"{took:.1f} s\n{log}"
    assert "stopped without handing its runs back" in log, log


def test_stop__database_thawed_just_before_hands_the_run_back(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    serving = Serving(tmp_path, pg_url, freezing, GRACE)
    freezing.freeze(new=True)
    time.sleep(3.0)
    freezing.thaw()
    freezing.restore()
    took = serving.stop(signal.SIGINT)
    log = serving.text()
    assert serving.proc.returncode == 0, log
    assert took < GRACE + HAND_BACK + SLACK, f"{took:.1f} s\n{log}"
    assert serving.owner() == ("PENDING", None), log  # handed back, for another to take


def test_stop__second_signal_on_a_frozen_database_stops_at_once(
    tmp_path: Path, pg_url: str, freezing: FreezingProxy
) -> None:
    serving = Serving(tmp_path, pg_url, freezing, 60.0)  # a grace it must not wait out
    freezing.freeze(new=True)
    time.sleep(1.0)
    took = serving.stop(signal.SIGINT, again_after=1.0)
    log = serving.text()
    assert serving.proc.returncode == 0, log
    assert took < 1.0 + HURRIED + SLACK, f"{took:.1f} s\n{log}"
    assert "received again: stopping at once" in log, log
