"""The waits for the database a store has in flight, and the runs they are for."""

from __future__ import annotations

import threading
import time

from cairn.store import waits
from cairn.store.waits import Waits


def test_waits__each_is_for_the_run_of_its_context() -> None:
    registry = Waits()
    outside = registry.begin("conn-a")
    token = waits.attempt_of("r1", 3)
    try:
        inside = registry.begin("conn-b")
    finally:
        waits.left(token)
    both = registry.begin("conn-c", (("r2", 1), ("r3", 2)))

    assert {w.conn: w.runs for w in registry.older_than(0)} == {
        "conn-a": (),
        "conn-b": (("r1", 3),),
        "conn-c": (("r2", 1), ("r3", 2)),
    }
    registry.end(inside)
    registry.end(outside)
    registry.end(both)
    registry.end(both)  # ending twice is harmless
    assert registry.older_than(0) == []


def test_stalled_runs__only_waits_older_than_asked_with_the_age_of_the_oldest() -> None:
    registry = Waits()
    registry.begin("old", (("r1", 1),))
    registry._waits[0] = registry._waits[0].__class__(time.monotonic() - 30, "old", (("r1", 1),))
    registry.begin("new", (("r1", 1), ("r2", 1)))

    stalled = registry.stalled_runs(10)

    assert list(stalled) == [("r1", 1)]
    assert 29 < stalled[("r1", 1)] < 60
    assert registry.stalled_runs(3600) == {}


def test_older_than__reads_a_consistent_copy_while_another_thread_writes() -> None:
    registry = Waits()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            registry.end(registry.begin("c"))

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(2000):
            registry.older_than(0)  # never "dictionary changed size during iteration"
    finally:
        stop.set()
        thread.join()


def _aged(registry: Waits, key: int, seconds: float) -> None:
    wait = registry._waits[key]
    registry._waits[key] = wait.__class__(time.monotonic() - seconds, wait.conn, wait.runs)


def test_stalled_runs__a_blocked_event_loop_is_not_a_stalled_database() -> None:
    # While the loop is blocked (an async step calling time.sleep), replies that came
    # are not read: the waits look old, but the database answered. They count only from
    # when the loop answers again.
    registry = Waits()
    _aged(registry, registry.begin("conn", (("r1", 1),)), 30)
    now = time.monotonic()

    registry.watch_loop(lambda: now)  # blocked now: waits count from now
    assert registry.stalled_runs(10) == {}
    assert registry.older_than(10) == []

    registry.watch_loop(lambda: now - 3)  # answering again for 3 s
    assert registry.stalled_runs(10) == {}
    assert 2.5 < registry.stalled_runs(2)[("r1", 1)] < 10

    registry.watch_loop(lambda: now - 60)  # answering all along: the wait's own age
    assert 29 < registry.stalled_runs(10)[("r1", 1)] < 60
