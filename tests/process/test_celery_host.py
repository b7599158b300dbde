"""cairn.celery's Host (the engine inside a Celery worker) around its stop, without a broker."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process


def test_celery__a_message_taken_after_the_host_stopped_is_refused_not_hung(
    tmp_path: Path,
) -> None:
    # A message Celery's pool starts while the worker shuts down (it was prefetched) must
    # not reopen the engine on the stopped loop: its thread would wait for ever, and the
    # warm shutdown with it.
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    published: list[Any] = []
    host = Host(lambda: Engine(url, workers=2, polls=False), published.extend, dispatch=0.05)
    host.start()
    host.stop().join(timeout=30)
    answers: list[bool] = []
    taker = threading.Thread(target=lambda: answers.append(host.take("no-such-run", "cairn")))
    taker.daemon = True
    taker.start()
    taker.join(timeout=10)
    assert not taker.is_alive(), "take() after stop() hung"
    assert answers == [False]
    stepper = threading.Thread(target=lambda: answers.append(host.take_step("no-such-task")))
    stepper.daemon = True
    stepper.start()
    stepper.join(timeout=10)
    assert answers == [False, False]
    batch = threading.Thread(target=lambda: answers.append(host.take_batch(["a", "b"], "cairn")))
    batch.daemon = True
    batch.start()
    batch.join(timeout=10)
    assert answers == [False, False, 0]


def test_celery__a_look_s_runs_go_in_batches_spread_over_several_messages_of_a_few() -> None:
    from cairn.celery.batching import BATCH, FEW, RUN, RUNS, SPREAD, STEP, batches

    def keys(n: int, queue: str = "cairn") -> list[Any]:
        return [((f"{queue}-{i}", "PENDING", 0.0), queue) for i in range(n)]

    # A lone run: its own message; fewer than FEW x 2 runs: one message (each message
    # costs Celery and the broker as much as a short run, and one worker with free slots
    # executes them all at once).
    assert batches(keys(1)) == [(RUN, "cairn-0", "cairn")]
    assert batches(keys(FEW * 2 - 1)) == [
        (RUNS, [f"cairn-{i}" for i in range(FEW * 2 - 1)], "cairn")
    ]
    # Many: at most BATCH ids a message, and at least SPREAD messages.
    many = batches(keys(BATCH * SPREAD * 2))
    assert len(many) == SPREAD * 2
    assert {(kind, len(ids)) for kind, ids, _ in many} == {(RUNS, BATCH)}
    # Between: as many messages (up to SPREAD) as hold FEW each, in order.
    some = batches(keys(FEW * 3 + 1))
    assert [len(ids) if kind == RUNS else 1 for kind, ids, _ in some] == [5, 5, 3]
    assert [ident for kind, ids, _ in some for ident in (ids if kind == RUNS else [ids])] == [
        f"cairn-{i}" for i in range(FEW * 3 + 1)
    ]
    # Per Celery queue; step attempts one a message.
    mixed = batches([*keys(8, "cairn.q"), (("t-1", STEP, 1.0), "cairn.step.gpu")])
    assert mixed == [
        (STEP, "t-1", "cairn.step.gpu"),
        (RUNS, ["cairn.q-0", "cairn.q-1", "cairn.q-2", "cairn.q-3"], "cairn.q"),
        (RUNS, ["cairn.q-4", "cairn.q-5", "cairn.q-6", "cairn.q-7"], "cairn.q"),
    ]


def test_celery__a_worker_with_more_threads_than_a_batch_sends_messages_as_big_as_them() -> None:
    # Each message costs a worker broker round trips (on Redis: a BRPOP, kombu's unacked
    # entry, an acknowledgement) whatever it names: a worker of 32 threads sends messages
    # of up to 32 runs, one an idle worker like it starts at once.
    from cairn.celery.batching import BATCH, BATCH_LIMIT, RUNS, SPREAD, batches
    from cairn.celery.host import Host

    def keys(n: int) -> list[Any]:
        return [((f"cairn-{i}", "PENDING", 0.0), "cairn") for i in range(n)]

    host = Host(lambda: None, lambda messages: None, dispatch=0.05)  # type: ignore[arg-type,return-value]
    assert host.batch == BATCH  # 8 threads (Celery's default here): BATCH
    host.concurrency = 32
    assert host.batch == 32
    many = batches(keys(32 * SPREAD * 2), most=host.batch)
    assert {(kind, len(ids)) for kind, ids, _ in many} == {(RUNS, 32)}
    host.concurrency = 2  # never fewer than BATCH: its runs wait here for a slot
    assert host.batch == BATCH
    host.concurrency = 5000  # never more than a message may name (messages.py)
    assert host.batch == BATCH_LIMIT
    host._loop.close()


def test_celery__the_dispatcher_hears_of_runs_stored_by_other_processes_at_once(
    store_url: str,
) -> None:
    # The engine's own loop that passes operator requests waited on the store's hints
    # too, and took them first about every other time: the dispatcher then published a
    # new run only at its next interval (here 2 s) instead of at once.
    import time

    import cairn
    from cairn.authoring.workflow import make_workflow
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = store_url
    registry = cairn.Registry()

    async def noop(n: int) -> int:
        return n

    make_workflow(noop, name="celery.host.noop", reg=registry)

    published: list[Any] = []
    engine = lambda: Engine(store_url, workers=2, polls=False, registry=registry)  # noqa: E731
    host = Host(engine, published.extend, dispatch=2.0)
    host.start()
    try:
        with cairn.Client(url) as client:
            time.sleep(0.3)  # the dispatcher's first look is over
            for n in range(4):
                began = time.monotonic()
                run_id = client.start("celery.host.noop", n, allow_unknown=True).run_id
                while not any(message[1] == run_id for message in published):
                    assert time.monotonic() - began < 1.0, f"run {n} not published within 1 s"
                    time.sleep(0.01)
    finally:
        host.stop().join(timeout=30)


def test_celery__the_dispatcher_looks_again_when_the_engine_runs_dry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs stored while the engine executed others were published only at the store's
    # next hint (SQLite's come every 50 ms) or interval: the engine sat idle meanwhile,
    # where cairn's own worker claims again as its slots free. With no hint at all (and
    # an interval of a minute), a run's end must bring the next look.
    import asyncio

    import cairn
    from cairn.authoring.workflow import make_workflow
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine
    from cairn.store.sqlite.store import SqliteStore

    waiting = threading.Event()  # the dispatcher's first look is over

    async def no_hint(self: SqliteStore, timeout: float) -> None:
        waiting.set()
        await asyncio.sleep(timeout)

    monkeypatch.setattr(SqliteStore, "wait_for_work", no_hint)
    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    registry = cairn.Registry()

    async def noop(n: int) -> int:
        return n

    make_workflow(noop, name="celery.host.dry", reg=registry)
    published: list[Any] = []
    second = threading.Event()

    def publish(messages: list[Any]) -> None:
        published.extend(messages)
        second.set()

    host = Host(
        lambda: Engine(url, workers=2, polls=False, registry=registry), publish, dispatch=60.0
    )
    host.start()
    try:
        assert waiting.wait(timeout=30)
        with cairn.Client(url) as client:
            first = client.start("celery.host.dry", 1, allow_unknown=True).run_id
            later = client.start("celery.host.dry", 2, allow_unknown=True).run_id
            assert published == []  # the first look was before them; no hint comes
            assert host.take(first, "cairn")  # a message for the first, as Celery's pool
            assert second.wait(timeout=30), "the next run waited for the interval (60 s)"
            assert [message[1] for message in published] == [later]
    finally:
        host.stop().join(timeout=30)


def test_celery__a_dispatcher_whose_slots_are_all_spoken_for_leaves_hints_for_later(
    store_url: str,
) -> None:
    # Each look reads every claimable run again; while every slot here is held, a run
    # stored elsewhere could not start here sooner (and other workers' dispatchers look
    # at it too), so its hint waits: the run is published once a slot frees.
    import asyncio
    import time

    import cairn
    from cairn.authoring.workflow import make_workflow
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = store_url
    registry = cairn.Registry()
    gate = threading.Event()

    async def held(n: int) -> int:
        await asyncio.to_thread(gate.wait, 30)
        return n

    make_workflow(held, name="celery.host.held", reg=registry)
    published: list[Any] = []
    engine = lambda: Engine(url, workers=1, polls=False, registry=registry)  # noqa: E731
    host = Host(engine, published.extend, dispatch=60.0)
    host.concurrency = 1
    host.start()
    try:
        with cairn.Client(url) as client:
            first = client.start("celery.host.held", 1, allow_unknown=True).run_id
            began = time.monotonic()
            while not any(message[1] == first for message in published):
                assert time.monotonic() - began < 10, "the first run was never published"
                time.sleep(0.01)
            taking = threading.Thread(target=host.take, args=(first, "cairn"))
            taking.start()
            while host.engine is None or host.engine.worker is None:
                time.sleep(0.01)
            while host.engine.worker.executions.free > 0:
                assert time.monotonic() - began < 10, "the first run never started"
                time.sleep(0.01)
            # The wait under way as the slot filled still takes a hint: one more run's
            # (published or not), then the dispatcher waits with every slot held.
            client.start("celery.host.held", 2, allow_unknown=True)
            time.sleep(0.5)
            later = client.start("celery.host.held", 3, allow_unknown=True).run_id
            time.sleep(0.5)  # hints come within 50 ms (SQLite) or at once (PostgreSQL)
            assert all(message[1] != later for message in published)
            gate.set()
            taking.join(timeout=30)
            while not any(message[1] == later for message in published):
                assert time.monotonic() - began < 30, "the later run was never published"
                time.sleep(0.01)
    finally:
        gate.set()
        host.stop().join(timeout=30)


def test_celery__the_dispatcher_looks_again_while_a_slot_s_worth_of_runs_is_still_in_line(
    store_url: str,
) -> None:
    # While every slot is spoken for, hints wait; the next look came only once the runs
    # held here were down to one a slot, all executing: they often ended together before
    # the look's messages arrived, and the worker sat idle (a 300-run round: 2 of 32 slots
    # busy for 20 ms with 200 runs stored and unpublished). It comes at two a slot now.
    import asyncio
    import time

    import cairn
    from cairn.authoring.workflow import make_workflow
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    registry = cairn.Registry()
    gate = threading.Event()

    async def gated(n: int) -> int:
        if n == 2:
            await asyncio.to_thread(gate.wait, 30)
        return n

    make_workflow(gated, name="celery.host.gated", reg=registry)
    published: list[Any] = []
    waiting = threading.Event()  # the dispatcher waits without hints

    async def no_hint(timeout: float) -> None:
        waiting.set()
        await asyncio.sleep(timeout)

    engine = lambda: Engine(store_url, workers=1, polls=False, registry=registry)  # noqa: E731
    host = Host(engine, published.extend, dispatch=60.0)
    host.concurrency = 1
    taking: threading.Thread | None = None
    with cairn.Client(store_url) as client:
        # Stored before the host starts: its first look publishes them, and no hint counts.
        ids = [client.start("celery.host.gated", n, allow_unknown=True).run_id for n in (1, 2, 3)]
    host.start()
    try:
        assert host.engine is not None
        host.engine.store.wait_for_work = no_hint  # type: ignore[method-assign]
        with cairn.Client(store_url) as client:
            began = time.monotonic()
            while {
                i for m in published for i in (m[1] if isinstance(m[1], list) else [m[1]])
            } != set(ids):
                assert time.monotonic() - began < 10, "the first runs were never published"
                time.sleep(0.01)
            assert waiting.wait(timeout=10)
            later = client.start("celery.host.gated", 4, allow_unknown=True).run_id
            # One message of three runs for one slot: the first executes, two wait in line.
            taking = threading.Thread(target=host.take_batch, args=(ids, "cairn"))
            taking.start()
            # The first ends (run 2 then holds the slot until the gate opens, run 3 in line):
            # two a slot are left, and the later run is published while they are.
            while all(later != m[1] for m in published):
                assert time.monotonic() - began < 10, "not published until the line ran out"
                time.sleep(0.01)
    finally:
        gate.set()
        if taking is not None:
            taking.join(timeout=30)
        host.stop().join(timeout=30)


def test_celery__a_second_sigterm_during_stop_does_not_deadlock_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Celery calls Host.stop from its SIGTERM handler on the main thread. A second SIGTERM
    # (`timeout` and `pkill` both signal; supervisors repeat) can run the handler again on
    # that thread while the first is inside stop(), holding its lock: a plain lock then
    # waits on itself and the worker never exits. Found by hand, not by a test.
    from cairn.celery import host as host_module
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    host = Host(lambda: Engine(url, workers=2, polls=False), lambda _: None, dispatch=0.05)
    host.start()
    real_thread = threading.Thread
    interrupted: list[threading.Thread] = []
    signals = [1]  # one more SIGTERM to come

    def thread_made_as_a_signal_arrives(*args: Any, **kwargs: Any) -> threading.Thread:
        if signals:  # the second handler runs here, inside the first one's stop()
            signals.pop()
            interrupted.append(host.stop())
        return real_thread(*args, **kwargs)

    monkeypatch.setattr(host_module.threading, "Thread", thread_made_as_a_signal_arrives)
    stopped: list[threading.Thread] = []
    handler = real_thread(target=lambda: stopped.append(host.stop()), daemon=True)
    handler.start()
    handler.join(timeout=10)
    monkeypatch.undo()
    assert not handler.is_alive(), "a second stop() inside the first deadlocked"
    for stopper in stopped + interrupted:
        stopper.join(timeout=30)
        assert not stopper.is_alive()


@pytest.mark.parametrize("started", [True, False], ids=["started", "never-started"])
def test_celery__a_stopped_host_leaves_no_socket_for_the_gc(tmp_path: Path, started: bool) -> None:
    # The host's event loop holds a socket pair. Left open after stop(), the garbage
    # collector closed it whenever it ran, and the ResourceWarning (an error under pytest)
    # landed in whichever later test was running: a CI run failed in test_prune_crash.
    import gc

    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    url = f"sqlite:///{tmp_path / 'cairn.db'}"
    host = Host(lambda: Engine(url, workers=2, polls=False), lambda _: None, dispatch=0.05)
    if started:
        host.start()
    host.stop().join(timeout=30)
    del host
    gc.collect()  # an unclosed socket warns here, in this test


def test_celery__a_look_s_runs_are_spread_over_no_more_messages_than_live_workers(
    store_url: str, tmp_path: Path
) -> None:
    # Each message costs its worker and the broker about as much as a short run whatever
    # it names: a lone worker's dispatcher sent a look's 40 runs in 4 messages of 10 for
    # other workers' sake (SPREAD) where there were none; it sends whole messages now,
    # and spreads them again over as many as there are live workers.
    import cairn
    from cairn.authoring.workflow import make_workflow
    from cairn.celery.host import Host
    from cairn.runtime.engine import Engine

    registry = cairn.Registry()

    async def noop(n: int) -> int:
        return n

    make_workflow(noop, name="celery.host.spread", reg=registry)

    with cairn.Client(store_url) as client:
        for n in range(40):  # stored before any look: a first look finds them all
            client.start("celery.host.spread", n, allow_unknown=True)

    def first_look(others: int) -> list[int]:
        hosts: list[Host] = []
        looks: list[list[Any]] = []
        looked = threading.Event()

        def publish(messages: list[Any]) -> None:
            looks.append(list(messages))
            looked.set()

        try:
            for n in range(others + 1):
                engine = lambda: Engine(store_url, workers=2, polls=False, registry=registry)  # noqa: E731
                host = Host(engine, publish if n == others else lambda _: None, dispatch=60.0)
                host.concurrency = 32  # messages of up to 32 runs
                hosts.append(host)
                host.start()  # the last one starts once the others are live workers
            assert looked.wait(timeout=30)
            return [len(ids) for _, ids, _ in looks[0]]
        finally:
            for host in hosts:
                host.stop().join(timeout=30)

    assert first_look(others=0) == [32, 8]
    # The same 40 runs (none taken: nothing consumed the messages), a second worker live.
    assert first_look(others=1) == [20, 20]
