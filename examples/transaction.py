"""Exactly-once writes with ``@cairn.transaction``: ``python examples/transaction.py [URL]``.

The application's tables live in cairn's own database (here a SQLite file; pass a
PostgreSQL URL to use that instead). Each transaction step's writes commit in one
transaction with the step's result: a crash at any point never reserves twice and never
loses a reservation that the workflow went on from.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import cairn

URL = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///transaction.db"
P = "?" if URL.startswith("sqlite") else "%s"  # the driver's placeholder


@cairn.transaction
def stock_up(conn: Any, sku: str, quantity: int) -> None:
    """Create the tables (DDL is transactional too) and stock `sku` once."""
    conn.execute("CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, units INTEGER)")
    conn.execute("CREATE TABLE IF NOT EXISTS reservations (sku TEXT, units INTEGER)")
    conn.execute(
        f"INSERT INTO stock (sku, units) VALUES ({P}, {P}) ON CONFLICT (sku) DO NOTHING",
        (sku, quantity),
    )


@cairn.transaction(retries=3)
def reserve(conn: Any, sku: str, units: int) -> int:
    """Take `units` of `sku` from stock and note the reservation; the units left."""
    conn.execute(f"UPDATE stock SET units = units - {P} WHERE sku = {P}", (units, sku))
    (left,) = conn.execute(f"SELECT units FROM stock WHERE sku = {P}", (sku,)).fetchone()
    if left < 0:
        raise cairn.FatalError(f"only {left + units} {sku} left")  # the UPDATE is rolled back
    conn.execute(f"INSERT INTO reservations (sku, units) VALUES ({P}, {P})", (sku, units))
    return int(left)


@cairn.workflow(name="shop.order")
async def order(sku: str, units: int) -> str:
    await stock_up(sku, 10)
    left = await reserve(sku, units)
    return f"reserved {units} {sku}: {left} left"


async def main() -> None:
    async with cairn.Engine(URL) as engine:
        run = await engine.start(order, "widget", 2)
        print(await run.result())
        for entry in await engine.history(run.run_id):
            print(f"  {entry.name}: {entry.status} after {entry.attempts} attempt(s)")


if __name__ == "__main__":
    asyncio.run(main())
