"""`cairn worker`: execute runs from the database until SIGINT or SIGTERM.

On the signal it stops claiming and lets the steps in flight finish for up to `--grace`;
each run is then handed back (PENDING) for another worker to take at once, and its
completed steps are never repeated. A second signal cuts the grace short.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from cairn import durations
from cairn.cli import options, output
from cairn.names import check_queue_name
from cairn.observability import jsonlog, logcontext
from cairn.runtime.engine import Engine
from cairn.runtime.worker import Worker
from cairn.store import locations

log = logcontext.logger("cairn.cli.worker")

# Fits inside the 30 s a supervisor commonly waits between SIGTERM and SIGKILL
# (Kubernetes' default), with time left to hand the runs back and exit.
GRACE = "25s"


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn worker`."""
    parser = commands.add_parser(
        "worker",
        parents=[common],
        help="execute queued, due and recovered runs until stopped",
        description="Execute runs stored in the database (started with --enqueue, woken "
        "from a sleep, or left by a dead process) until SIGINT or SIGTERM. Logs one line "
        "per run started and finished on stderr.",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N",
        type=int,
        default=None,
        help="runs executed at once (default 256; 8 with --transport celery)",
    )
    parser.add_argument(
        "--queue",
        metavar="NAME",
        action="append",
        nargs="+",
        help="serve only runs on these queues, and the steps sent to step queues of the same "
        "names (repeatable; default: every run, queued or not, and no step queue)",
    )
    parser.add_argument(
        "--step-queue",
        metavar="NAME",
        action="append",
        nargs="+",
        help="also execute the steps sent to these step queues (@cairn.step(queue=NAME)), "
        "while serving runs as without it (repeatable)",
    )
    parser.add_argument(
        "--transport",
        choices=("cairn", "celery"),
        default="cairn",
        help="how runs reach this worker: cairn polls the database (default), or celery: "
        "as messages of a Celery broker (needs cairn-workflows[celery])",
    )
    parser.add_argument(
        "--broker",
        metavar="URL",
        default=None,
        help="with --transport celery: the broker, amqp://... (RabbitMQ) or redis://... "
        "(default: CAIRN_BROKER_URL)",
    )
    parser.add_argument(
        "--lease",
        metavar="DUR",
        default="10s",
        help="how long a silent worker keeps its runs before others take them over (10s)",
    )
    parser.add_argument(
        "--grace",
        metavar="DUR",
        default=GRACE,
        help="on SIGINT or SIGTERM, how long steps in flight may finish before they are "
        f"cut off and their runs handed back ({GRACE}; a second signal: at once)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines (default), or one JSON object per line with run_id, workflow, "
        "step and attempt",
    )
    parser.add_argument(
        "--metrics-port",
        metavar="N",
        type=int,
        default=None,
        help="serve Prometheus metrics at http://HOST:N/metrics (needs cairn-workflows[metrics])",
    )
    parser.add_argument(
        "--metrics-host",
        metavar="HOST",
        default="0.0.0.0",
        help="address the metrics server binds (0.0.0.0: every interface)",
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="OpenTelemetry spans of runs and steps, sent to the global tracer provider "
        "(installed by a workflow module or opentelemetry-instrument; needs cairn-workflows[otel])",
    )
    parser.set_defaults(handler=serve)


def serve(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn worker`."""
    if ns.concurrency is not None and ns.concurrency < 1:
        raise ValueError(f"--concurrency must be a positive integer, got {ns.concurrency}")
    if ns.metrics_port is not None and not 0 < ns.metrics_port < 65536:
        raise ValueError(f"--metrics-port must be a port number, got {ns.metrics_port}")
    # A bad value fails before anything starts, naming the option.
    durations.parse(ns.grace, what="--grace")
    durations.parse(ns.lease, what="--lease")
    queues = [name for group in ns.queue or () for name in group]
    step_queues = list(
        dict.fromkeys([*queues, *(name for group in ns.step_queue or () for name in group)])
    )
    for name in step_queues:  # every --queue is a step queue too: all are checked here
        check_queue_name(name, "--queue" if name in queues else "--step-queue")
    if ns.transport == "celery":
        return _serve_celery(ns, glob, queues, step_queues)
    if ns.broker is not None:
        raise ValueError("--broker is for --transport celery")
    options.import_modules(glob.modules)
    _log_to_stderr(ns.log_format)
    code = asyncio.run(_serve(ns, glob, queues, step_queues))
    stuck = options.busy_run_threads(wait=1.0)
    if stuck:
        log.info("exiting without waiting for %d sync step thread(s) still running", stuck)
    return code


def _serve_celery(
    ns: argparse.Namespace, glob: options.Globals, queues: list[str], step_queues: list[str]
) -> int:
    """`cairn worker --transport celery`: a Celery worker (thread pool) executing runs."""
    if ns.metrics_port is not None or ns.tracing:
        raise ValueError("--metrics-port and --tracing are not available with --transport celery")
    locations.refuse_memory(glob.url, "cairn worker --transport celery")
    from cairn import celery as cairn_celery
    from cairn.celery import serving

    concurrency = ns.concurrency or 8
    app = cairn_celery.app(
        ns.broker,
        glob.url,
        modules=glob.modules,
        concurrency=concurrency,
        lease=ns.lease,
        grace=ns.grace,
        queues=queues,
        step_queues=step_queues,
    )
    options.import_modules(glob.modules)
    _log_to_stderr(ns.log_format)
    log.info(
        "celery worker starting: concurrency %d, lease %s, broker %s, database %s, "
        "celery queues %s, step queues %s",
        concurrency,
        ns.lease,
        output.redact(app.conf.broker_url),
        output.redact(glob.url or "(default)"),
        ", ".join(app.cairn_queues)
        + ("" if queues else " (and each workflow queue's as its runs appear)"),
        ", ".join(step_queues) if step_queues else "none",
    )
    return serving.serve(app, concurrency)


def _log_to_stderr(form: str) -> None:
    # On the root logger, so that the workflows' own records come out the same way (at
    # the root's level, WARNING unless they set another); cairn's own at INFO.
    handler = logging.StreamHandler()
    handler.addFilter(logcontext.RunContextFilter())
    if form == "json":
        handler.setFormatter(jsonlog.JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger("cairn").setLevel(logging.INFO)
    # psycopg_pool warns of every connection it drops or fails to open, often in three
    # lines: a database restart made dozens. cairn says in lines of its own when its
    # database is lost and when it is back ("lost ...; retrying", "heartbeat failed").
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


async def _serve(
    ns: argparse.Namespace, glob: options.Globals, queues: list[str], step_queues: list[str]
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []
    engine: Engine | None = None

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        if len(received) == 1:
            stop.set()
            return
        log.info("%s received again: stopping at once", sig.name)
        if engine is not None:
            engine.hurry()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    extra: dict[str, Any] = {}
    if ns.concurrency is not None:
        extra["workers"] = ns.concurrency
    if queues:
        extra["queues"] = queues
    if step_queues:
        extra["step_queues"] = step_queues
    if ns.metrics_port is not None:
        extra["metrics"] = True
    if ns.tracing:
        extra["tracing"] = True
    engine = Engine(glob.url, lease=ns.lease, grace=ns.grace, modules=glob.modules, **extra)
    log.info(
        "worker starting: concurrency %d, lease %s, grace %s, database %s, queues %s, "
        "step queues %s",
        engine.workers,
        ns.lease,
        ns.grace,
        output.database(engine.url),
        ", ".join(queues) if queues else "all",
        ", ".join(step_queues) if step_queues else "none",
    )
    if engine.metrics is not None:  # answering scrapes from start-up on (gauges once open)
        engine.metrics.serve(ns.metrics_port, ns.metrics_host)
        log.info("metrics at http://%s:%d/metrics", ns.metrics_host, ns.metrics_port)
    failure: str | None = None
    async with engine:
        worker = engine.worker
        owner = worker.env.owner if worker is not None else "?"
        if engine.tracing is not None and not engine.tracing.provider_installed():
            log.warning(
                "--tracing: no OpenTelemetry tracer provider is installed, so spans go "
                "nowhere: install one in a workflow module "
                "(opentelemetry.trace.set_tracer_provider) or run the worker under "
                "opentelemetry-instrument"
            )
        log.info("worker %s ready", owner)
        await _until_stopped(stop, worker)
        if worker is not None and worker.failure is not None:
            failure = worker.failure
        else:
            log.info(
                "%s received: stopping with %d run(s) in flight (a second signal stops at once)",
                received[0] if received else "signal",
                len(worker.active) if worker is not None else 0,
            )
    if failure is not None:
        log.error("worker %s stopped: %s", owner, failure)
        return 1
    log.info("worker %s stopped", owner)
    return 0


async def _until_stopped(stop: asyncio.Event, worker: Worker | None) -> None:
    """Until a signal comes, or the worker stops by itself (its database is read-only)."""
    waiters = [asyncio.ensure_future(stop.wait())]
    if worker is not None:
        waiters.append(asyncio.ensure_future(worker.failed.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
