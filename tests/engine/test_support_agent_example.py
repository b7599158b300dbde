"""examples/support_agent.py on both stores, with its scripted FunctionModel (offline)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import cairn

from .kit import WAIT

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_agent.py"


def load_example() -> ModuleType:
    name = "examples.support_agent"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def private_registry(example: ModuleType) -> cairn.Registry:
    """The example's declarations alone (the global registry holds other tests' too)."""
    registry = cairn.Registry()
    registry.add_workflow(example.handle_ticket)
    registry.add_step(example.refund)
    return registry


def effects(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def answer(engine: cairn.Engine, run_id: str, values: dict[str, Any]) -> None:
    async with asyncio.timeout(WAIT):
        while not (tasks := [t for t in await engine.tasks.list() if t.run_id == run_id]):
            await asyncio.sleep(0.01)
    assert tasks[0].title == "Refund 42.50 for order o-1001?"
    await engine.tasks.submit(tasks[0].task_id, values, by="ann")


@pytest.mark.parametrize(
    ("approved", "reply"),
    [
        (True, "Your refund request: refunded 42.50 (receipt "),
        (False, "Your refund request: a person declined it (too late)"),
    ],
)
async def test_support_agent__looks_up_asks_and_refunds_once(
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approved: bool,
    reply: str,
) -> None:
    example = load_example()
    log = tmp_path / "effects.log"
    monkeypatch.setenv("SUPPORT_LOG", str(log))
    engine = cairn.Engine(store_url, registry=private_registry(example), poll_interval=0.05)
    async with engine:
        run = await engine.start(example.handle_ticket, "Please refund order o-1001")
        await answer(engine, run.run_id, {"approved": approved, "note": "too late"})
        output = await run.result(timeout=WAIT)
        keys = [h.key for h in await engine.history(run.run_id)]

    assert output.startswith(reply)
    seen = Counter((line["kind"], line.get("turn", line.get("order_id"))) for line in effects(log))
    refunds = {("refund", "o-1001"): 1} if approved else {}
    assert seen == {
        ("model", 0): 1,
        ("model", 1): 1,
        ("model", 2): 1,
        ("lookup", "o-1001"): 1,
        **refunds,
    }
    asked = ["~task:approve-refund#1", *(["support.refund#1"] if approved else [])]
    assert keys == [
        "support.model_request#1",
        "support.tool.lookup_order#1",
        "support.model_request#2",
        *asked,
        "support.model_request#3",
    ]
