"""examples/support_agent.py in a worker process that the crash tests kill with SIGKILL.

    python support_worker.py DB EFFECTS [--hold KIND:VALUE]

Every side effect of the example (a model turn, a lookup, a refund) is a line in EFFECTS.
``--hold model:1`` stops this process right after the effect of that kind and first value
(the model asked for turn 1; ``lookup:o-1001``; ``refund:o-1001``), inside its step and
before the step commits: there the test kills it. Without it the process starts or
resumes the ticket and prints one JSON line with the agent's reply once the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import cairn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_agent.py"
RUN_ID = "ticket-1"
MESSAGE = "Please refund order o-1001"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples.support_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def hold_at(example: ModuleType, point: str) -> None:
    """Make the example's effect() stop this process for good after the effect `point`."""
    written = example.effect

    def effect(kind: str, **detail: Any) -> None:
        written(kind, **detail)
        if point == f"{kind}:{next(iter(detail.values()), '')}":
            threading.Event().wait()  # the effect happened; its step never commits

    example.effect = effect


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("effects")
    parser.add_argument("--hold", default="")
    options = parser.parse_args()
    os.environ["SUPPORT_LOG"] = options.effects
    example = load_example()
    if options.hold:
        hold_at(example, options.hold)
    async with cairn.Engine(f"sqlite:///{options.db}", workers=2, lease="30s") as engine:
        handle = await engine.start(example.handle_ticket, MESSAGE, run_id=RUN_ID)
        reply = await handle.result(timeout=60)
    print(json.dumps({"reply": reply}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
