"""Worker identity: a neighbour is declared dead only when that is provable.

Containers with host networking and cloned machines share a host name, and a pid means
nothing outside its PID namespace: a worker in another namespace must never be judged by
our /proc, only by its heartbeat.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

from cairn.runtime import leases
from cairn.store.records import WorkerRecord

ME = leases.this_process()
pytestmark = pytest.mark.skipif(ME is None, reason="needs Linux /proc")


def _worker(process: str | None, worker_id: str = "w") -> WorkerRecord:
    return WorkerRecord(worker_id, leases.HOST, 1, 0.0, time.time(), process=process)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_process__round_trips_through_its_text() -> None:
    assert ME is not None
    assert leases.Process.parse(str(ME)) == ME
    assert leases.Process.parse("garbage") is None
    assert leases.Process.parse(None) is None


def test_provably_dead__a_live_process_of_ours_is_alive() -> None:
    assert not leases.provably_dead(_worker(str(ME)), ME)


def test_provably_dead__a_gone_process_of_our_namespace_is_dead() -> None:
    assert ME is not None
    gone = leases.Process(ME.boot_id, ME.pid_ns, _dead_pid(), 1)
    assert leases.provably_dead(_worker(str(gone)), ME)


def test_provably_dead__a_reused_pid_is_dead() -> None:
    assert ME is not None
    # This very pid, but a process that started at another time: the pid was reused.
    reused = leases.Process(ME.boot_id, ME.pid_ns, ME.pid, ME.start_ticks + 1)
    assert leases.provably_dead(_worker(str(reused)), ME)


@pytest.mark.parametrize("field", ["boot_id", "pid_ns"])
def test_provably_dead__never_across_boots_or_namespaces(field: str) -> None:
    assert ME is not None
    parts = {
        "boot_id": ME.boot_id,
        "pid_ns": ME.pid_ns,
        "pid": _dead_pid(),
        "start_ticks": 1,
    }
    parts[field] = "elsewhere"
    other = leases.Process(**parts)  # type: ignore[arg-type]
    assert not leases.provably_dead(_worker(str(other)), ME)


def test_provably_dead__unknown_identity_is_never_dead() -> None:
    assert not leases.provably_dead(_worker(None), ME)
    assert not leases.provably_dead(_worker(str(ME)), None)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_provably_dead__a_live_worker_in_another_pid_namespace_is_not_judged() -> None:
    # The bug of issue 11: two containers, one host name; the worker in the other PID
    # namespace has a pid that does not exist here, yet it is very much alive.
    script = (
        "import json, sys, time; from cairn.runtime import leases; "
        "print(json.dumps(str(leases.this_process())), flush=True); time.sleep(30)"
    )
    try:
        proc = subprocess.Popen(
            [
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
                sys.executable,
                "-c",
                script,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        pytest.skip(f"unshare is not usable here: {exc}")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            pytest.skip(f"unshare failed: {proc.stderr.read() if proc.stderr else ''}")
        theirs = leases.Process.parse(json.loads(line))
        assert theirs is not None and ME is not None
        assert theirs.pid_ns != ME.pid_ns
        assert theirs.pid <= 3  # pid 1 or 2 inside its namespace: not the same process here
        neighbour = _worker(str(theirs), "container-b")
        assert not leases.provably_dead(neighbour, ME)
        assert leases.dead_neighbours([neighbour], me="container-a", process=ME) == []
    finally:
        proc.kill()
        proc.communicate()


def test_this_process__refuses_a_proc_of_another_namespace() -> None:
    # Under `unshare --pid --fork` without --mount-proc, /proc still shows the host's
    # processes: our pid there names someone else, so no identity is claimed.
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1)")
    script = "from cairn.runtime import leases; print(leases.this_process())"
    done = subprocess.run(
        ["unshare", "--pid", "--fork", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"unshare is not usable here: {done.stderr.strip()}")
    assert done.stdout.strip() == "None"


def test_may_judge_heartbeats__only_after_a_whole_quiet_lease() -> None:
    now = time.monotonic()
    assert leases.may_judge_heartbeats(since=now - 20, trouble_at=0.0, lease=10)
    assert not leases.may_judge_heartbeats(since=now - 5, trouble_at=0.0, lease=10)  # new
    assert not leases.may_judge_heartbeats(since=now - 20, trouble_at=now - 3, lease=10)
