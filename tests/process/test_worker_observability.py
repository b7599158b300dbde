"""`cairn worker --log-format json` and `--metrics-port`: real worker processes."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from prometheus_client.parser import text_string_to_metric_families
from tests.engine.spans import exporter

import cairn

pytestmark = pytest.mark.process

SRC = Path(cairn.__file__).resolve().parents[1]
TIMEOUT = 30.0

FLOWS = """
import logging
import os

import cairn

log = logging.getLogger("obsflows")

if os.environ.get("OBS_SPANS"):  # what an application does to export its spans
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    out = open(os.environ["OBS_SPANS"], "a", buffering=1)
    exporter = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\\n")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


@cairn.step()
async def greet(name):
    log.warning("hello %s", name)
    return f"hello {name}"


@cairn.workflow(name="obs.greet")
async def greeting(name: str) -> str:
    return await greet(name)


@cairn.workflow(name="obs.waiter")
async def waiter() -> str:
    await greet("waiter")
    return await cairn.wait_for_event("go")
"""


class Worker:
    """A `cairn worker` subprocess whose stderr lines can be awaited."""

    def __init__(self, project: Path, url: str, *args: str, **environ: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(project)])
        env.update(environ)
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
        run_id = client.start("obs.greet", "ann", allow_unknown=True).run_id

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=TIMEOUT)
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def scrape_until(port: int, what: str, ready: Callable[[Samples], bool]) -> Samples:
    deadline = time.monotonic() + TIMEOUT
    while True:
        seen = scrape(port)
        if ready(seen):
            return seen
        assert time.monotonic() < deadline, f"no {what} within {TIMEOUT}s: {seen}"
        time.sleep(0.05)  # polling the endpoint, not synchronisation


def test_worker__metrics_port_serves_metrics_that_move_as_runs_progress(
    project: Path, workers: list[Worker]
) -> None:
    url = f"sqlite:///{project / 'cairn.db'}"
    port = free_port()
    worker = Worker(project, url, "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    workers.append(worker)
    worker.wait_for(f"metrics at http://127.0.0.1:{port}/metrics")
    worker.wait_for(" ready")

    started = ("cairn_runs_started_total", (("workflow", "obs.waiter"),))
    attempts = ("cairn_step_attempts_total", (("step", "greet"),))
    waiting = ("cairn_runs", (("queue", ""), ("status", "waiting")))
    completed = ("cairn_runs_finished_total", (("status", "completed"), ("workflow", "obs.waiter")))
    lag = ("cairn_claim_lag_seconds_count", (("queue", ""),))
    before = scrape(port)
    assert before[("cairn_workers_live", ())] == 1
    assert started not in before and completed not in before

    with cairn.Client(url) as client:
        run = client.start("obs.waiter", allow_unknown=True)
        seen = scrape_until(port, "waiting run", lambda s: s.get(waiting) == 1)
        assert seen[started] == 1
        assert seen[attempts] == 1
        assert seen[lag] == 1  # the run was claimed from the queue
        assert completed not in seen

        run.send_event("go", "went")
        # The gauges are read from the database at most once a second.
        seen = scrape_until(
            port, "completed run", lambda s: s.get(completed) == 1 and s.get(waiting) == 0
        )
    assert seen[started] == 1  # waking is not starting again
    assert seen[attempts] == 1  # the replayed step is not attempted again
    assert seen[("cairn_run_duration_seconds_count", completed[1])] == 1
    assert worker.terminate() == 0


def test_worker__a_run_started_in_a_span_continues_its_trace_in_a_worker_process(
    project: Path, workers: list[Worker]
) -> None:
    exporter()  # a tracer provider in this process, as a web application has
    url = f"sqlite:///{project / 'cairn.db'}"
    spans_file = project / "spans.jsonl"
    with cairn.Client(url) as client:
        with trace.get_tracer("tests").start_as_current_span("web request") as request:
            run_id = client.start("obs.greet", "otel", allow_unknown=True).run_id
    worker = Worker(project, url, "--tracing", OBS_SPANS=str(spans_file))
    workers.append(worker)
    worker.wait_for(f"run {run_id} COMPLETED")
    assert worker.terminate() == 0

    spans = {s["name"]: s for s in map(json.loads, spans_file.read_text().splitlines())}
    started = request.get_span_context()
    run_span, step_span = spans["run obs.greet"], spans["step greet"]
    assert run_span["context"]["trace_id"] == f"0x{started.trace_id:032x}"
    assert run_span["parent_id"] == f"0x{started.span_id:016x}"
    assert step_span["parent_id"] == run_span["context"]["span_id"]
    assert run_span["attributes"]["cairn.run_id"] == run_id
    assert run_span["attributes"]["cairn.outcome"] == "completed"
    assert not [line for line in worker.log if "tracer provider" in line]


def test_worker__tracing_without_a_tracer_provider_says_spans_go_nowhere(
    project: Path, workers: list[Worker]
) -> None:
    # `--tracing` with no provider installed made spans that went nowhere, silently.
    worker = Worker(project, f"sqlite:///{project / 'cairn.db'}", "--tracing")
    workers.append(worker)
    line = worker.wait_for("tracer provider")
    assert line.endswith(
        "--tracing: no OpenTelemetry tracer provider is installed, so spans go nowhere: "
        "install one in a workflow module (opentelemetry.trace.set_tracer_provider) or "
        "run the worker under opentelemetry-instrument"
    )
    worker.wait_for("ready")
    assert worker.terminate() == 0


def test_worker__lost_connections_log_one_line_each_from_cairn_not_the_pool(
    project: Path, workers: list[Worker], pg_url: str
) -> None:
    # A database restart or a network blip resets every connection. cairn says so in its
    # own lines ("lost ...; retrying", "heartbeat failed ..."); psycopg_pool's warnings
    # ("discarding closed connection: <psycopg.AsyncConnection [BAD] at 0x...>", "error
    # connecting in 'cairn': ...", three lines each) repeated them dozens of times.
    from urllib.parse import urlsplit

    from tests.chaos.proxy import FreezingProxy

    server = urlsplit(pg_url)
    proxy = FreezingProxy((server.hostname or "127.0.0.1", server.port or 5432))
    database = server.path.lstrip("/")
    try:
        worker = Worker(project, proxy.url(database), "--lease", "2s")
        workers.append(worker)
        worker.wait_for("ready")
        for _ in range(4):
            time.sleep(0.6)  # the pool has connections open again
            proxy.reset()
        time.sleep(1.5)
        assert worker.terminate() == 0
    finally:
        proxy.close()
    assert any("lost postgresql" in line or "heartbeat failed" in line for line in worker.log)
    stamped = [line for line in worker.log if line[:4].isdigit()]
    assert stamped == worker.log, "\n".join(line for line in worker.log if line not in stamped)
    noise = [line for line in worker.log if "AsyncConnection" in line or "error connecting" in line]
    assert noise == []
