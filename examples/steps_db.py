"""Read and write the application's own database from a workflow: ``python examples/steps_db.py``.

The database is named ``app`` (here a SQLite file; PostgreSQL or MariaDB URLs work the
same). Values travel as bound parameters (``?`` with a list, ``:name`` with a dict),
never written into the SQL, and rows come back as dicts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import cairn
from cairn.steps import db

SCHEMA = "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, customer TEXT, state TEXT)"


@cairn.workflow
async def place_order(customer: str) -> list[dict[str, Any]]:
    await db.update("app", SCHEMA)
    await db.update("app", "INSERT INTO orders (customer, state) VALUES (?, ?)", [customer, "new"])
    sql = "SELECT id, customer, state FROM orders WHERE customer = :customer ORDER BY id"
    args = {"customer": customer}
    return await db.query("app", sql, args)


async def main() -> None:
    databases = {"app": "sqlite:///steps-db-app.db"}
    async with cairn.Engine("sqlite:///steps-db.db", databases=databases) as engine:
        run = await engine.start(place_order, "ada")
        for row in await run.result():
            print(row)


if __name__ == "__main__":
    asyncio.run(main())
