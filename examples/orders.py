"""An order workflow: reserve stock, charge the card, send a confirmation letter.

Every step prints a line when it really runs and appends to a side-effect log (the file
named by ORDERS_LOG, default ``cairn-orders-effects.log`` in the temporary folder),
standing in for the outside world: the log is what a customer would see twice if a step
ever ran twice.

Run an order in this process (starting it, or resuming it if it already exists)::

    python -m examples.orders o-1001 --db sqlite:///cairn.db

Or through the command line: ``cairn run examples.orders:process_order o-1001``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from decimal import Decimal
from typing import Any

import cairn

LETTER_SECONDS = float(os.environ.get("ORDERS_LETTER_SECONDS", "1.0"))
"""How long posting the letter takes (the demo kills a process in the middle of it)."""


def _log_path() -> str:
    default = os.path.join(tempfile.gettempdir(), "cairn-orders-effects.log")
    return os.environ.get("ORDERS_LOG", default)


def effect(step: str, event: str, **detail: Any) -> None:
    """Append one line to the side-effect log; `event` is "start", "failed" or "done"."""
    line = {"t": time.time(), "pid": os.getpid(), "step": step, "event": event, **detail}
    with open(_log_path(), "a", encoding="utf-8") as log:
        log.write(json.dumps(line, default=str) + "\n")


def read_effects(path: str | None = None) -> list[dict[str, Any]]:
    """Every line of the side-effect log, oldest first."""
    try:
        with open(path or _log_path(), encoding="utf-8") as log:
            return [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []


def say(message: str) -> None:
    """Print a step's line, marked with this process's id."""
    print(f"  [pid {os.getpid()}] {message}", flush=True)


@cairn.step()
async def reserve_stock(order_id: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Hold the items in the warehouse."""
    effect("reserve_stock", "start", order=order_id)
    count = sum(item["qty"] for item in items)
    reservation = f"res-{order_id}"
    effect("reserve_stock", "done", order=order_id, reservation=reservation)
    say(f"reserve_stock: reserved {count} items for {order_id} ({reservation})")
    return {"reservation": reservation, "items": count}


@cairn.step(retries=cairn.Retry(max_attempts=5, delay="200ms", backoff=2.0, max_delay="5s"))
async def charge_card(order_id: str, amount: Decimal) -> dict[str, Any]:
    """Charge the customer; the simulated gateway answers 503 to an order's first request."""
    effect("charge_card", "start", order=order_id)
    earlier = [e for e in read_effects() if e["step"] == "charge_card" and e["order"] == order_id]
    if len(earlier) == 1:  # only the "start" line just written: this is the first request
        effect("charge_card", "failed", order=order_id, error="503 Service Unavailable")
        say("charge_card: payment gateway answered 503; cairn will retry in ~0.2 s")
        raise cairn.RetryableError("payment gateway answered 503 Service Unavailable")
    charge_id = f"ch-{order_id}"
    effect("charge_card", "done", order=order_id, charge=charge_id, amount=str(amount))
    say(f"charge_card: charged EUR {amount} ({charge_id})")
    return {"charge_id": charge_id, "amount": amount}


@cairn.step()
def send_letter(order_id: str, charge_id: str) -> str:
    """Post the confirmation letter (a sync step: cairn runs it in a thread)."""
    effect("send_letter", "start", order=order_id)
    say(f"send_letter: printing and posting the letter for {order_id} ...")
    time.sleep(LETTER_SECONDS)  # the slow mail service
    letter_id = f"letter-{order_id}"
    effect("send_letter", "done", order=order_id, letter=letter_id)
    say(f"send_letter: letter posted ({letter_id}, receipt for {charge_id})")
    return letter_id


SAMPLE_ITEMS = [{"sku": "tea-earl-grey", "qty": 2}, {"sku": "mug-blue", "qty": 1}]
SAMPLE_AMOUNT = Decimal("59.90")


@cairn.workflow(name="orders.process")
async def process_order(
    order_id: str, items: list[dict[str, Any]] | None = None, amount: Decimal = SAMPLE_AMOUNT
) -> dict[str, Any]:
    """Reserve, charge, confirm: each step's result is committed before the next starts."""
    reservation = await reserve_stock(order_id, items or SAMPLE_ITEMS)
    charge = await charge_card(order_id, amount)
    letter = await send_letter(order_id, charge["charge_id"])
    return {
        "order_id": order_id,
        "reservation": reservation["reservation"],
        "charge_id": charge["charge_id"],
        "amount": charge["amount"],
        "letter_id": letter,
    }


async def run_order(url: str | None, order_id: str, *, report: str | None = None) -> None:
    """Start the order's run (or pick up the existing one) and wait for it to finish."""
    opening = time.time()
    async with cairn.Engine(url) as engine:
        opened = time.time()
        # Starting with an existing run_id returns that run: the same command starts a new
        # order or waits for one that a crashed process left behind (recovered on open).
        run = await engine.start(
            process_order, order_id, SAMPLE_ITEMS, SAMPLE_AMOUNT, run_id=f"order-{order_id}"
        )
        result = await run.result(timeout=60)
        done = time.time()
    shown = ", ".join(f"{key}={value}" for key, value in result.items())
    print(f"  [pid {os.getpid()}] run {run.run_id} COMPLETED: {shown}", flush=True)
    if report:  # timings for the demo, which measures recovery
        with open(report, "w", encoding="utf-8") as out:
            json.dump({"opening": opening, "opened": opened, "done": done}, out)


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m examples.orders ORDER_ID [--db URL]`."""
    parser = argparse.ArgumentParser(prog="python -m examples.orders", description=__doc__)
    parser.add_argument("order_id")
    parser.add_argument("--db", default=None, help="database URL (default: CAIRN_DATABASE_URL)")
    parser.add_argument("--report", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    asyncio.run(run_order(args.db, args.order_id, report=args.report))


if __name__ == "__main__":
    sys.exit(main())
