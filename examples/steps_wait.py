"""Wait for something outside the run: ``python examples/steps_wait.py``.

The workflow polls the application's database every 2 seconds until its order is paid;
between polls the run is parked (SLEEPING, no worker held), and the whole wait is one
entry in its history. Here ``main`` marks the order paid after 3 seconds, as the
payment service would.
"""

from __future__ import annotations

import asyncio
import sqlite3

import cairn
from cairn.steps import db, sleep, wait

APP = "steps-wait-app.db"


@cairn.workflow
async def ship_when_paid(order_id: int) -> str:
    async def is_paid() -> bool:
        rows = await db.query("app", "SELECT state FROM orders WHERE id = ?", [order_id])
        return bool(rows) and rows[0]["state"] == "paid"

    await wait.until(is_paid, every="2s", timeout="1m")
    await sleep.sleep_chunked(500, chunk_ms=100)  # let the label printer warm up
    return f"order {order_id} shipped"


def set_state(order_id: int, state: str) -> None:
    """What another program does to the application's database."""
    with sqlite3.connect(APP) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, state TEXT)")
        connection.execute("REPLACE INTO orders (id, state) VALUES (?, ?)", (order_id, state))
    connection.close()


async def main() -> None:
    set_state(7, "new")
    async with cairn.Engine(
        "sqlite:///steps-wait.db", databases={"app": f"sqlite:///{APP}"}
    ) as engine:
        run = await engine.start(ship_when_paid, 7)
        await asyncio.sleep(3)
        print("status while waiting:", (await run.status()).value)
        set_state(7, "paid")
        print(await run.result(timeout=60))
        for entry in await engine.history(run.run_id):
            print(f"  {entry.name}: {entry.status}, {entry.attempts} attempt(s)")


if __name__ == "__main__":
    asyncio.run(main())
