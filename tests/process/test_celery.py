"""cairn on Celery, with real brokers (RabbitMQ on 5672, Redis on 6379) and real processes.

Locally a broker that is down skips its tests (with the reason); with CI=true they fail
(tests/process/celery_procs.py). Broker faults: test_celery_faults.py.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from tests.process import celery_procs
from tests.process.celery_procs import DEADLINE, ROOT, CeleryWorker
from tests.store.kit import execute

import cairn

pytestmark = [pytest.mark.process, celery_procs.ONE_AT_A_TIME]

broker = celery_procs.broker
procs = celery_procs.procs
_effects = celery_procs.effects
_until = celery_procs.until
own_queue = celery_procs.own_queue


def test_celery__killed_worker_run_finishes_on_another_without_repeating_steps(
    store_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    first = CeleryWorker(store_url, broker, tmp_path, "first", "--queue", own_queue)
    procs.append(first)
    first.ready()
    with cairn.Client(store_url) as client:
        handle = client.start("celery.held", queue=own_queue, allow_unknown=True)
        _until("hold start", lambda: ("hold start", first.proc.pid) in _effects(tmp_path))
        first.proc.kill()  # SIGKILL mid-run: its message is unacknowledged, its lease lapses
        first.proc.wait()
        second = CeleryWorker(store_url, broker, tmp_path, "second", "--queue", own_queue)
        procs.append(second)
        second.ready()
        (tmp_path / "release").touch()
        assert handle.result(timeout=DEADLINE) == ["first", "held", "last"]
    counts = Counter(what for what, _ in _effects(tmp_path))
    assert counts == Counter({"first": 1, "hold start": 2, "hold end": 1, "last": 1})
    assert ("hold end", second.proc.pid) in _effects(tmp_path)


def test_celery__a_step_executed_there_streams_to_readers_elsewhere(
    store_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    worker = CeleryWorker(store_url, broker, tmp_path, "worker", "--queue", own_queue)
    procs.append(worker)
    worker.ready()
    with cairn.Client(store_url) as client:
        handle = client.start("celery.streams", 50, queue=own_queue, allow_unknown=True)
        values = list(client.read_stream(handle.run_id, "tokens"))  # ends at the close
        assert handle.result(timeout=DEADLINE) == 50
    assert values == list(range(50))


def test_celery__a_message_delivered_twice_runs_the_run_once(
    sqlite_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    from cairn import celery as cairn_celery

    worker = CeleryWorker(
        sqlite_url, broker, tmp_path, "worker", "--concurrency", "4", "--queue", own_queue
    )
    procs.append(worker)
    worker.ready()
    app = cairn_celery.app(broker, sqlite_url)
    with cairn.Client(sqlite_url) as client:
        handle = client.start("celery.held", queue=own_queue, allow_unknown=True)
        _until("hold start", lambda: any(w == "hold start" for w, _ in _effects(tmp_path)))
        for _ in range(3):  # duplicates while it runs: each finds it held
            app.send_task("cairn.run", args=[handle.run_id], queue=f"cairn.{own_queue}")
        time.sleep(1.0)
        (tmp_path / "release").touch()
        assert handle.result(timeout=DEADLINE) == ["first", "held", "last"]
        for _ in range(3):  # and after it finished: each finds it over
            app.send_task("cairn.run", args=[handle.run_id], queue=f"cairn.{own_queue}")
        time.sleep(1.0)
    counts = Counter(what for what, _ in _effects(tmp_path))
    assert counts == Counter({"first": 1, "hold start": 1, "hold end": 1, "last": 1})
    assert worker.proc.poll() is None


def _results(url: str, runs: int, queue: str) -> dict[int, list[int]]:
    with cairn.Client(url) as client:
        handles = {
            n: client.start("celery.math", n, run_id=f"math-{n}", queue=queue, allow_unknown=True)
            for n in range(runs)
        }
        return {n: handle.result(timeout=DEADLINE) for n, handle in handles.items()}


def test_celery__200_runs_complete_with_the_same_results_as_cairn_workers(
    broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    celery_db = f"sqlite:///{tmp_path / 'celery.db'}"
    own_db = f"sqlite:///{tmp_path / 'own.db'}"
    workers = [
        CeleryWorker(
            celery_db, broker, tmp_path, f"celery{i}", "--concurrency", "16", "--queue", own_queue
        )
        for i in range(2)
    ]
    procs.extend(workers)
    for worker in workers:
        worker.ready()
    through_celery = _results(celery_db, 200, own_queue)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    own = subprocess.Popen(
        [
            *(sys.executable, "-m", "cairn", "worker", "--db", own_db),
            *("-m", "tests.process.celery_flow", "--concurrency", "16"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        through_own = _results(own_db, 200, own_queue)  # a cairn worker serves every queue
    finally:
        own.kill()
        own.wait()
    assert through_celery == through_own
    assert through_celery[12] == [144, (144 % 97) ** 2]
    for worker in workers:
        assert worker.proc.poll() is None


def test_celery__broker_is_checked(tmp_path: Path) -> None:
    from cairn import celery as cairn_celery
    from cairn.errors import ConfigError

    with pytest.raises(ConfigError, match="unsupported Celery broker URL 'kafka://x'"):
        cairn_celery.app("kafka://x", "sqlite:///x.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["CAIRN_BROKER_URL"] = ""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "cairn", "worker", "--transport", "celery"),
            *("--db", f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "no Celery broker: pass --broker URL" in done.stderr


def test_celery__plain_celery_workers_run_a_schedule_once_per_tick(
    broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")},
        "CAIRN_BROKER_URL": broker,
        "CAIRN_DATABASE_URL": f"sqlite:///{tmp_path / 'ticks.db'}",
        "CAIRN_MODULES": "tests.process.celery_schedule_flow",
        "CAIRN_EFFECTS": str(tmp_path / "effects.txt"),
        "CAIRN_TICK_QUEUE": own_queue,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    celery = []
    logs = [(tmp_path / f"celery{i}.log").open("w") for i in range(2)]
    for i, log in enumerate(logs):
        celery.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "celery", "-A", "cairn.celery.worker", "worker"),
                    *("-c", "4", "--without-gossip", "--without-mingle", "-n", f"tick{i}@%h"),
                    *("-Q", f"cairn.{own_queue}"),
                ],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        )
    try:
        _until("three ticks", lambda: len(_effects(tmp_path)) >= 3)
        time.sleep(2.5)
    finally:
        for proc in celery:
            proc.terminate()  # a warm shutdown: the engine hands its runs back
        codes = [proc.wait(timeout=DEADLINE) for proc in celery]
        for log in logs:
            log.close()
        celery_procs.delete_own({own_queue})
    ticks = Counter(what for what, _ in _effects(tmp_path))
    assert len(ticks) >= 4
    assert set(ticks.values()) == {1}, ticks  # one run per tick, on either worker
    assert codes == [0, 0], [(tmp_path / f"celery{i}.log").read_text()[-2000:] for i in range(2)]


def test_celery__a_killed_step_queue_worker_s_attempt_is_retried_on_another(
    store_url: str, broker: str, tmp_path: Path, procs: list[CeleryWorker], own_queue: str
) -> None:
    flow = ("-m", "tests.process.step_queue_flow")
    # The run's queue is this test's own; the step queue "gpu" is the flow module's.
    general = CeleryWorker(store_url, broker, tmp_path, "general", *flow, "--queue", own_queue)
    gpu_a = CeleryWorker(store_url, broker, tmp_path, "gpu_a", *flow, "--queue", "gpu")
    procs += [general, gpu_a]
    general.ready()
    gpu_a.ready()
    with cairn.Client(store_url) as client:
        handle = client.start("steps.pipeline", 2, queue=own_queue, allow_unknown=True)
        _until("train start", lambda: any(w == "train start" for w, _ in _effects(tmp_path)))
        gpu_a.proc.kill()  # SIGKILL inside the remote attempt
        gpu_a.proc.wait()
        gpu_b = CeleryWorker(store_url, broker, tmp_path, "gpu_b", *flow, "--queue", "gpu")
        procs.append(gpu_b)
        gpu_b.ready()
        (tmp_path / "release").touch()
        assert handle.result(timeout=DEADLINE) == [3, 30, "published 30", gpu_b.proc.pid]
    done = _effects(tmp_path)
    counts = Counter(what for what, _ in done)
    assert counts == Counter({"prepare": 1, "train start": 2, "train end": 1, "publish": 1})
    assert [pid for what, pid in done if what.startswith("train")] == [
        gpu_a.proc.pid,
        gpu_b.proc.pid,
        gpu_b.proc.pid,
    ]


def test_celery__an_encrypted_run_completes_with_ciphertext_stored(
    store_url: str,
    tmp_path: Path,
    procs: list[CeleryWorker],
    monkeypatch: pytest.MonkeyPatch,
    own_queue: str,
) -> None:
    # One broker (RabbitMQ) is enough: encryption happens in the engine, not the transport.
    broker, port = celery_procs.BROKERS["rabbitmq"]
    celery_procs.reachable_or_skip("rabbitmq", port)
    keys = "k1:" + base64.b64encode(b"\x01" * 32).decode()
    monkeypatch.setenv("CAIRN_KEYS", keys)  # the client's
    worker = CeleryWorker(
        store_url, broker, tmp_path, "worker", "--queue", own_queue, env={"CAIRN_KEYS": keys}
    )
    procs.append(worker)
    worker.ready()
    with cairn.Client(store_url) as client:
        handle = client.start("celery.math", 7, queue=own_queue, allow_unknown=True)
        assert celery_procs.results([handle], [worker]) == [[49, 49 * 49]]
    stored = execute(store_url, "SELECT args, result FROM runs")
    stored += execute(store_url, "SELECT result, result FROM steps WHERE kind = 'step'")
    assert len(stored) == 3 and all(
        text.startswith("aesgcm:k1:") for row in stored for text in row
    ), stored


def test_celery__a_worker_without_queue_serves_runs_of_every_workflow_queue(
    broker: str, tmp_path: Path, procs: list[CeleryWorker]
) -> None:
    # `cairn worker` serves every run, queued or not; with --transport celery too: runs of
    # a queue its modules declare ("limited") and of one only the start names ("adhoc").
    db = f"sqlite:///{tmp_path / 'queues.db'}"
    for queue in ("cairn.limited", "cairn.adhoc"):
        celery_procs.purge(broker, queue)
    worker = CeleryWorker(db, broker, tmp_path, "worker")
    procs.append(worker)
    worker.ready()
    with cairn.Client(db) as client:
        handles = [client.start("celery.limited", n, allow_unknown=True) for n in range(3)]
        handles += [
            client.start("celery.once", n, queue="adhoc", allow_unknown=True) for n in (7, 8)
        ]
        assert celery_procs.results(handles, [worker]) == [0, 1, 2, 7, 8]
    log = worker.log.read_text()
    assert "consuming Celery queue 'cairn.adhoc'" in log
    for queue in ("cairn.limited", "cairn.adhoc"):
        celery_procs.purge(broker, queue)
