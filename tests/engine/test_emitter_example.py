"""examples/emitter.py on both stores: each scheduled poll fans records out, once each."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

import cairn
from cairn.authoring.registry import default_registry
from cairn.clock import VirtualClock

from .kit import WAIT

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "emitter.py"
START = datetime(2024, 3, 30, 12, 0, tzinfo=UTC).timestamp()


def load_example() -> ModuleType:
    name = "examples.emitter"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # Importing it declared a 5 s schedule in the global registry: left there, every later
    # TestEngine that advances an hour ran its 720 ticks (24 s per test in a full run).
    default_registry.schedules.pop(module.POLL.id, None)
    return module


def private_registry(example: ModuleType) -> cairn.Registry:
    """The example's declarations alone (the global registry holds other tests' too)."""
    registry = cairn.Registry()
    for defn in (example.poll_feed, example.process_record):
        registry.add_workflow(defn)
    for step in (example.fetch_records, example.store_record):
        registry.add_step(step)
    registry.add_schedule(example.POLL)
    return registry


async def test_emitter__each_record_is_processed_once_across_ticks(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = load_example()
    feed, out = tmp_path / "feed.json", tmp_path / "out.jsonl"
    monkeypatch.setenv("EMITTER_FEED", str(feed))
    monkeypatch.setenv("EMITTER_OUT", str(out))
    feed.write_text(json.dumps([{"id": "r-1", "amount": 12}, {"id": "r-2", "amount": 30}]))
    clock = VirtualClock(START)
    engine = cairn.Engine(
        store_url, registry=private_registry(example), clock=clock, lease="30d", poll_interval=0.05
    )

    async def tick(seconds: int) -> list[str]:
        clock.advance(5)
        assert engine.scheduler is not None
        await engine.scheduler.run_due()
        stamp = datetime.fromtimestamp(START + seconds, UTC).isoformat().replace("+00:00", "Z")
        poll = await engine.get(f"sched:feeds.poll:{stamp}")
        started: list[str] = await poll.result(timeout=WAIT)
        for run_id in started:
            await (await engine.get(run_id)).result(timeout=WAIT)
        return started

    async with engine:
        first = await tick(5)
        assert first == [
            "emit:record.received:r-1:records.process",
            "emit:record.received:r-2:records.process",
        ]
        # The feed is read whole on every tick: r-1 and r-2 come again, r-3 is new.
        feed.write_text(json.dumps([{"id": f"r-{n}", "amount": n} for n in (1, 2, 3)]))
        second = await tick(10)
        assert second == [*first, "emit:record.received:r-3:records.process"]
        processors = await engine.list_runs(workflow="records.process")
    assert sorted(line["id"] for line in example.processed(str(out))) == ["r-1", "r-2", "r-3"]
    assert sorted(run.columns["record_id"] for run in processors) == ["r-1", "r-2", "r-3"]
