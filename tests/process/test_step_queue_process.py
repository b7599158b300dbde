"""Step queues across real processes: a step runs only on a worker serving its queue, and a
remote attempt whose worker is killed (SIGKILL) is taken over by another worker of the queue
once its lease runs out, with no completed step repeated.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import cairn
from cairn.authoring.primitives import idempotency_key
from cairn.store import open_store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import step_tasks
from cairn.store.records import StepTaskRecord

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


class Worker:
    """A `cairn worker` process serving tests.process.step_queue_flow."""

    def __init__(self, url: str, effects: Path, log: Path, *args: str) -> None:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
            "CAIRN_EFFECTS": str(effects),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        }
        self.log = log
        self.out = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cairn",
                "worker",
                "--db",
                url,
                "-m",
                "tests.process.step_queue_flow",
                "--lease",
                "2s",
                *args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.out,
            text=True,
        )

    def worker_id(self) -> str:
        """The id the worker logs once ready."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                if " ready" in line and "worker " in line:
                    return line.split("worker ", 1)[1].split()[0]
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.02)
        pytest.fail(f"worker not ready within {DEADLINE}s: {self.log.read_text()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.out.close()


@pytest.fixture
def procs() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def _effects(path: Path) -> list[tuple[str, int]]:
    if not path.exists():
        return []
    return [
        (what, int(pid))
        for what, pid in (line.rsplit(" pid=", 1) for line in path.read_text().splitlines())
    ]


def _until(what: str, ready: object, procs: list[Worker]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not ready():  # type: ignore[operator]
        for worker in procs:
            if worker.proc.poll() is not None and worker.proc.returncode != -9:
                pytest.fail(f"a worker exited: {worker.log.read_text()[-3000:]}")
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE}s"
        time.sleep(0.02)


async def _reports(url: str, run_id: str) -> list[dict[str, object]]:
    store = open_store(url)
    await store.open()
    try:
        journal = await store.read(journal_ops.load_journal(run_id))
    finally:
        await store.close()

    return [json.loads(step.result or "{}") for step in journal if step.kind == "remote"]


def test_step_queue__killed_gpu_worker_attempt_is_taken_over_by_another_gpu_worker(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    cpu = Worker(store_url, effects, tmp_path / "cpu.log")
    gpu_a = Worker(store_url, effects, tmp_path / "gpu_a.log", "--queue", "gpu")
    procs += [cpu, gpu_a]
    cpu.worker_id()
    a_id = gpu_a.worker_id()
    with cairn.Client(store_url) as client:
        handle = client.start("steps.pipeline", 2, allow_unknown=True)
        _until("train start", lambda: any(w == "train start" for w, _ in _effects(effects)), procs)
        assert ("train start", gpu_a.proc.pid) in _effects(effects)
        gpu_a.proc.kill()  # SIGKILL inside the remote attempt
        gpu_a.proc.wait()
        assert handle.status() == cairn.RunStatus.WAITING  # the run's own worker lives on
        gpu_b = Worker(store_url, effects, tmp_path / "gpu_b.log", "--queue", "gpu")
        procs.append(gpu_b)
        b_id = gpu_b.worker_id()
        (tmp_path / "release").touch()
        result = handle.result(timeout=DEADLINE)
    assert result == [3, 30, "published 30", gpu_b.proc.pid]
    done = _effects(effects)
    counts = Counter(what for what, _ in done)
    # Completed steps ran once; only the killed attempt ran again.
    assert counts == Counter({"prepare": 1, "train start": 2, "train end": 1, "publish": 1})
    assert ("prepare", cpu.proc.pid) in done
    # The step ran only on workers of its queue. (Once woken, the run itself may go on
    # on any worker that knows its workflow: --queue chooses which pending runs it takes.)
    assert [pid for what, pid in done if what.startswith("train")] == [
        gpu_a.proc.pid,
        gpu_b.proc.pid,
        gpu_b.proc.pid,
    ]
    reports = asyncio.run(_reports(store_url, handle.run_id))
    assert [(r["queue"], r["worker"], r["claims"], r["ok"]) for r in reports] == [
        ("gpu", b_id, 2, True)
    ]
    # The attempt's row ends with the claim that reported; the killed one is kept as
    # interrupted (an "interrupted" attempt of the run's history), not as running.
    [task] = asyncio.run(_step_tasks(store_url, handle.run_id))
    assert (task.status, task.worker_id, task.claims) == ("done", b_id, 2), task
    assert [c["worker"] for c in json.loads(task.interrupted or "[]")] == [a_id]
    shown = subprocess.run(
        [sys.executable, "-m", "cairn", "runs", "show", handle.run_id, "--db", store_url],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"on worker {b_id} of step queue 'gpu': completed" in shown.stdout, shown.stdout


class _Recorder(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.keys.append(self.headers.get("Idempotency-Key"))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


async def _step_tasks(url: str, run_id: str) -> list[StepTaskRecord]:
    store = open_store(url)
    await store.open()
    try:
        return await store.read(step_tasks.of_run(run_id))
    finally:
        await store.close()


async def _claimable(url: str) -> list[tuple[str, str, int]]:
    store = open_store(url)
    await store.open()
    try:
        return await store.read(step_tasks.claimable(limit=10))
    finally:
        await store.close()


def test_step_queue__a_killed_gpu_workers_attempt_ends_lost_with_its_run(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    cpu = Worker(store_url, effects, tmp_path / "cpu.log")
    gpu = Worker(store_url, effects, tmp_path / "gpu.log", "--step-queue", "gpu")
    procs += [cpu, gpu]
    cpu.worker_id()
    gpu_id = gpu.worker_id()
    with cairn.Client(store_url) as client:
        handle = client.start("steps.pipeline", 2, allow_unknown=True)
        _until("train start", lambda: any(w == "train start" for w, _ in _effects(effects)), procs)
        gpu.proc.kill()  # SIGKILL inside the attempt: nobody renews its claim
        gpu.proc.wait()
        # Its lease runs out: the attempt could be taken over (no worker of the queue is left).
        _until("the lease to run out", lambda: asyncio.run(_claimable(store_url)), procs)
        [held] = asyncio.run(_step_tasks(store_url, handle.run_id))
        assert (held.status, held.worker_id) == ("running", gpu_id)
        client.cancel(handle.run_id)
        with pytest.raises(cairn.RunCancelled):
            handle.result(timeout=DEADLINE)
    # The run is over: its attempt is no longer shown as running (never to be claimed).
    [ended] = asyncio.run(_step_tasks(store_url, handle.run_id))
    assert (ended.status, ended.worker_id, ended.claims) == ("lost", gpu_id, 1), ended
    assert ended.finished_at is not None and ended.input is None
    assert asyncio.run(_claimable(store_url)) == []


def test_step_queue__an_attempt_no_worker_took_is_dropped_with_its_run(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    cpu = Worker(store_url, effects, tmp_path / "cpu.log")  # no worker serves "gpu"
    procs.append(cpu)
    cpu.worker_id()
    with cairn.Client(store_url) as client:
        handle = client.start("steps.pipeline", 2, allow_unknown=True)
        _until(
            "the attempt sent",
            lambda: bool(asyncio.run(_step_tasks(store_url, handle.run_id))),
            procs,
        )
        client.cancel(handle.run_id)
        with pytest.raises(cairn.RunCancelled):
            handle.result(timeout=DEADLINE)
    [ended] = asyncio.run(_step_tasks(store_url, handle.run_id))
    assert (ended.status, ended.worker_id, ended.claims) == ("dropped", None, 0), ended


def test_step_queue__a_step_in_another_process_sees_what_a_local_one_does(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.keys = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/stamp"
    try:
        effects = tmp_path / "effects.txt"
        cpu = Worker(store_url, effects, tmp_path / "cpu.log")
        gpu = Worker(store_url, effects, tmp_path / "gpu.log", "--step-queue", "gpu")
        procs += [cpu, gpu]
        cpu.worker_id()
        gpu.worker_id()
        with cairn.Client(store_url) as client:
            handle = client.start("steps.stamped", url, allow_unknown=True)
            here, there = handle.result(timeout=DEADLINE)
    finally:
        server.shutdown()
        server.server_close()
    run_id = handle.run_id
    assert here[:5] == [
        run_id,
        "stamp_here#1",
        1,
        idempotency_key(run_id, "stamp_here#1"),
        "steps.stamped",
    ]
    assert there[:5] == [
        run_id,
        "stamp_there#1",
        1,
        idempotency_key(run_id, "stamp_there#1"),
        "steps.stamped",
    ]
    assert there[5] == gpu.proc.pid  # the only worker serving "gpu"
    assert server.keys == [here[3], there[3]]  # type: ignore[attr-defined]


def test_step_queue__a_cancel_meeting_a_killed_gpu_worker_records_one_cancelled_attempt(
    store_url: str, tmp_path: Path, procs: list[Worker]
) -> None:
    effects = tmp_path / "effects.txt"
    cpu = Worker(store_url, effects, tmp_path / "cpu.log")
    gpu_a = Worker(store_url, effects, tmp_path / "gpu_a.log", "--queue", "gpu")
    procs += [cpu, gpu_a]
    cpu.worker_id()
    a_id = gpu_a.worker_id()
    with cairn.Client(store_url) as client:
        handle = client.start("steps.pipeline", 2, allow_unknown=True)
        _until("train start", lambda: any(w == "train start" for w, _ in _effects(effects)), procs)
        client.cancel(handle.run_id)
        gpu_a.proc.kill()  # SIGKILL inside the attempt, as the cancel goes through
        gpu_a.proc.wait()
        with pytest.raises(cairn.RunCancelled):
            handle.result(timeout=DEADLINE)
        # Another worker of the queue, alive past the dead one's lease, takes nothing.
        gpu_b = Worker(store_url, effects, tmp_path / "gpu_b.log", "--queue", "gpu")
        procs.append(gpu_b)
        gpu_b.worker_id()
        (tmp_path / "release").touch()
        time.sleep(3.0)  # past the 2 s lease: a claimable attempt would have been taken
        history = client.history(handle.run_id)
    counts = Counter(what for what, _ in _effects(effects))
    assert counts == Counter({"prepare": 1, "train start": 1}), counts
    assert [e.kind for e in history].count("cancel") == 1
    shown = subprocess.run(
        [sys.executable, "-m", "cairn", "runs", "show", handle.run_id, "--db", store_url, "--json"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert shown.returncode == 0, shown.stderr

    attempts = json.loads(shown.stdout)["attempts"]
    assert [(a["key"], a["outcome"], a["worker"]) for a in attempts] == [
        ("train#1", "cancelled", a_id)
    ], attempts
