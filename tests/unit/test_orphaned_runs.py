"""A RUNNING run whose owner is not live: who can take it over, and the line that says so."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairn.representation import words
from cairn.runtime import leases
from cairn.store.records import RunRecord, WorkerRecord

NOW = 1_000.0


def _run(queue: str | None = "lane", status: str = "RUNNING") -> RunRecord:
    return RunRecord("r", "flows.held", status, "{}", 0.0, 0.0, owner="w-old", queue=queue)


def _worker(
    worker_id: str, beat: float, runs: list[str] | None = None, flows: list[str] | None = None
) -> WorkerRecord:
    return WorkerRecord(
        worker_id,
        "host",
        1,
        0.0,
        beat,
        queues=leases.queues_column(runs, []),
        workflows=None if flows is None else json.dumps(flows),
        lease=2.0,
    )


def test_orphaned__a_live_owner_or_a_run_not_running_is_none() -> None:
    assert leases.orphaned([_worker("w-old", NOW - 1)], _run(), NOW) is None
    assert leases.orphaned([], _run(status="WAITING"), NOW) is None


def test_orphaned__a_silent_owner_and_no_worker_of_its_queue() -> None:
    workers = [_worker("w-old", NOW - 30), _worker("w-other", NOW, runs=["other"])]
    found = leases.orphaned(workers, _run(), NOW)
    assert found == {
        "owner": "w-old",
        "owner_state": "silent",
        "silent_for": 30.0,
        "lease": 2.0,
        "takers": False,
        "blocked": "queue",
    }
    text = words.takeover_text({**found, "name": "lane"})
    assert text == "no takeover: owner silent 30s (lease 2s); no live worker on 'lane'"
    assert len(f"waiting for  {text}") <= 80


@pytest.mark.parametrize(
    ("worker", "takers", "blocked"),
    [
        (_worker("w-new", NOW, runs=None), True, None),  # every queue
        (_worker("w-new", NOW, runs=["lane"], flows=["flows.held"]), True, None),
        (_worker("w-new", NOW, runs=["lane"], flows=["flows.other"]), False, "workflow"),
        (_worker("w-new", NOW - 5, runs=["lane"]), False, "queue"),  # silent too
    ],
)
def test_orphaned__a_taker_serves_its_queue_and_workflow(
    worker: WorkerRecord, takers: bool, blocked: str | None
) -> None:
    found = leases.orphaned([worker], _run(), NOW)
    assert found is not None
    assert (found["owner_state"], found["takers"], found["blocked"]) == ("gone", takers, blocked)


def test_orphaned__a_run_of_no_queue_is_taken_only_by_a_worker_of_every_queue() -> None:
    named = leases.orphaned([_worker("w-new", NOW, runs=["lane"])], _run(queue=None), NOW)
    every = leases.orphaned([_worker("w-new", NOW, runs=None)], _run(queue=None), NOW)
    assert (named or {}).get("takers") is False
    assert (every or {}).get("takers") is True


@pytest.mark.parametrize(
    ("facts", "text"),
    [
        (
            {"owner_state": "dead", "silent_for": 6.2, "takers": False, "blocked": "queue"},
            "no takeover: owner dead (silent 6.2s); no live worker on 'lane'",
        ),
        (
            {"owner_state": "gone", "takers": False, "blocked": "workflow"},
            "no takeover: owner unregistered; no live worker knows it",
        ),
        (
            {"owner_state": "silent", "silent_for": 125, "lease": 10, "takers": True},
            "a live worker to take it over: owner silent 2m05s (lease 10s)",
        ),
    ],
)
def test_takeover_text__one_short_line(facts: dict[str, Any], text: str) -> None:
    line = words.takeover_text({"kind": "takeover", "name": "lane", **facts})
    assert line == text
    assert len(f"waiting for  {line}") <= 80  # as `cairn runs show` prints it
