"""Write a setpoint and see it confirmed: ``python examples/steps_tags.py [opcua://HOST:PORT]``.

Talks OPC UA to a PLC or a simulator: start ``python examples/plc_simulator.py`` first
for one on 127.0.0.1:4840 whose line starts running when given a speed.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import cairn
from cairn.steps import tags, wait

SPEED = "ns=2;s=Line1.Speed"
RUNNING = "ns=2;s=Line1.Running"


@cairn.workflow
async def start_line(rpm: int) -> dict[str, Any]:
    confirmed = await tags.write_confirm(SPEED, rpm, timeout_ms=5000, poll_ms=100)
    running = await wait.until_tag_equals(RUNNING, True, timeout_ms=5000, poll_ms=100)
    return {"speed": confirmed, "running": running}


async def main(provider: str) -> None:
    async with cairn.Engine("sqlite:///steps-tags.db", tags=provider) as engine:
        run = await engine.start(start_line, 1200)
        print(await run.result())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "opcua://127.0.0.1:4840"))
