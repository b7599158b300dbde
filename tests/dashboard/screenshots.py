"""Screenshots of every dashboard page for the docs: `python -m tests.dashboard.screenshots`.

It fills a fresh SQLite database with a small shop's runs (an engine with workers
executes them), serves it with a real `cairn dashboard` process and photographs each page
in Chromium (/usr/bin/chromium) into docs/images/. The pictures are of real pages.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import cairn
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow
from cairn.store.programs import workers as worker_ops

from .server import start_server

OUT = Path(__file__).resolve().parents[2] / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1360, 860

APPROVAL = {
    "type": "object",
    "required": ["approved", "amount", "reason"],
    "properties": {
        "approved": {"type": "boolean", "title": "Approve the refund"},
        "amount": {"type": "integer", "minimum": 1, "description": "in euros"},
        "reason": {"title": "Reason", "enum": ["damaged", "late", "wrong item", "other"]},
        "note": {"type": "string", "title": "Note to the customer"},
        "pickup": {
            "type": "object",
            "title": "Pick-up address",
            "required": ["city"],
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
}


def shop(registry: cairn.Registry) -> None:
    """The demo workflows: a checkout, a refund approval, a nightly report, mail, a callback."""
    tries: dict[str, int] = {}

    async def reserve(order: str) -> dict[str, Any]:
        return {"order": order, "items": 3, "warehouse": "ghent-2"}

    async def charge(order: str, amount: float) -> dict[str, Any]:
        tries[order] = tries.get(order, 0) + 1
        if order == "o-1043" and tries[order] == 1:
            raise ConnectionError("payment gateway timed out after 10s")
        return {"charge_id": f"ch_{order[2:]}9f3", "amount": amount, "currency": "EUR"}

    async def ship(order: str) -> str:
        return f"parcel {order[2:]}-NL"

    async def render_report(day: str) -> dict[str, Any]:
        return {"day": day, "rows": 18250}

    async def send_mail(to: str) -> None:
        raise ValueError(f"mailbox {to!r} does not exist (550 5.1.1)")

    steps = {
        "reserve_stock": make_step(reserve, "reserve_stock", None, None, registry),
        "charge_card": make_step(
            charge, "charge_card", cairn.Retry(max_attempts=3, delay=0.2), None, registry
        ),
        "ship": make_step(ship, "ship", None, None, registry),
        "render": make_step(render_report, "render", None, None, registry),
        "send": make_step(
            send_mail, "send", cairn.Retry(max_attempts=2, delay=0.1), None, registry
        ),
    }

    async def checkout(order: str, amount: float, customer: str) -> dict[str, Any]:
        cairn.set_columns(order=order, customer=customer)
        cairn.progress("reserving stock", current=1, total=3)
        await steps["reserve_stock"](order)
        cairn.progress("charging card", current=2, total=3)
        charged = await steps["charge_card"](order, amount)
        if order == "o-1045":
            await cairn.wait_for_event("shipping_slot", timeout="2h")
        cairn.progress("shipping", current=3, total=3)
        parcel = await steps["ship"](order)
        return {"order": order, "charge": charged["charge_id"], "parcel": parcel}

    async def refund(order: str, amount: int) -> Any:
        cairn.set_columns(order=order)
        return await cairn.human_task(
            "approve_refund",
            title=f"Refund {amount} EUR for order {order}?",
            data={"order": order, "amount": amount, "customer": "ada@example.com"},
            form=APPROVAL,
            assignee="ann",
            timeout="1d",
        )

    async def nightly(day: str) -> dict[str, Any]:
        cairn.set_columns(day=day)
        cairn.progress("rendering sections", current=40, total=100)
        report = await steps["render"](day)
        await cairn.sleep("6h")
        return report

    async def welcome(to: str) -> None:
        cairn.set_columns(to=to)
        await steps["send"](to)

    async def chunk(day: str, part: int) -> int:
        tries[f"{day}/{part}"] = tries.get(f"{day}/{part}", 0) + 1
        if part % 60 == 7 and tries[f"{day}/{part}"] == 1:
            raise TimeoutError(f"warehouse API timed out on part {part}")
        await asyncio.sleep(0.002 * (part % 5))
        return part

    steps["chunk"] = make_step(
        chunk, "load_chunk", cairn.Retry(max_attempts=3, delay=0.05), None, registry
    )

    async def backfill(day: str, parts: int) -> int:
        cairn.set_columns(day=day)
        total = 0
        for part in range(parts):
            cairn.progress("loading chunks", current=part, total=parts)
            total += await steps["chunk"](day, part)
            if part == parts // 2:
                await cairn.sleep(0.2)  # the warehouse asks for a pause
        return total

    async def payment_callback(order: str) -> Any:
        cairn.set_columns(order=order)
        hook = await cairn.create_hook("psp_callback", timeout="1h")
        return await hook

    for name, fn, queue in (
        ("shop.checkout", checkout, None),
        ("shop.refund", refund, None),
        ("reports.nightly", nightly, "reports"),
        ("mail.welcome", welcome, "mail"),
        ("shop.payment_callback", payment_callback, None),
        ("reports.backfill", backfill, None),
    ):
        make_workflow(fn, name=name, reg=registry, queue=queue)


async def fill(url: str) -> tuple[cairn.Engine, dict[str, str]]:
    """Start the demo runs; return the running engine and the ids worth photographing."""
    registry = cairn.Registry()
    shop(registry)
    engine = cairn.Engine(url, registry=registry, workers=8, poll_interval=0.05)
    await engine.__aenter__()
    await engine.queues.update("mail", concurrency=5, rate="100/1m")
    await engine.queues.update("reports", concurrency=1)
    await engine.schedules.create(
        "nightly-report", "reports.nightly", cron="0 3 * * *", args=("today",)
    )
    await engine.schedules.create(
        "digest", "mail.welcome", every="15m", args=("digest@example.com",)
    )
    await engine.schedules.pause("digest")
    for n, (amount, who) in enumerate(((59.9, "ada"), (120.0, "grace"), (18.5, "linus"))):
        run = await engine.start("shop.checkout", f"o-{1040 + n}", amount, who)
        await run.result(timeout=10)
    retried = await engine.start("shop.checkout", "o-1043", 240.0, "ken")
    await retried.result(timeout=10)
    await engine.start("shop.checkout", "o-1045", 75.0, "barbara")
    await engine.start("shop.refund", "o-1041", 45, run_id="refund-o-1041")
    await engine.start("reports.nightly", "2025-06-01")
    failed = await engine.start("mail.welcome", "nobody@example.invalid")
    for who in ("tim", "margaret"):  # queued for later: counted on the queues page
        await engine.start("mail.welcome", f"{who}@example.com", delay="1h")
    await engine.start("shop.payment_callback", "o-1046")
    long = await engine.start("reports.backfill", "2025-05-31", 240)
    await engine.schedules.trigger("nightly-report")
    try:
        await failed.result(timeout=10)
    except cairn.RunFailed:
        pass
    await long.result(timeout=60)
    await asyncio.sleep(1.0)  # the waiting runs reach their waits
    await _dead_worker(engine)
    return engine, {"run": retried.run_id, "long": long.run_id}


async def _dead_worker(engine: cairn.Engine) -> None:
    """A worker that a neighbour on its machine found gone, as after a kill -9."""
    from cairn.store.records import WorkerRecord

    gone = WorkerRecord("w-7f3a@worker-2", "worker-2", 4242, 0.0, 0.0, concurrency=8)
    await engine.store.write(worker_ops.register_worker(gone))
    await engine.store.write(worker_ops.expire_workers([gone.worker_id]))


async def photograph(base: str, ids: dict[str, str]) -> list[Path]:
    """Each page into OUT; the task form after one wrong answer, to show its field errors."""
    from playwright.async_api import async_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    saved = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM)
        context = await browser.new_context(
            base_url=base, viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1
        )
        page = await context.new_page()

        async def shot(name: str, path: str | None = None, *, full: bool = False) -> None:
            if path is not None:
                await page.goto(path)
            target = OUT / f"dashboard-{name}.png"
            await page.screenshot(path=str(target), full_page=full)
            saved.append(target)

        await shot("runs", "/")
        await shot("run", f"/runs/{ids['run']}", full=True)
        await shot("run-long", f"/runs/{ids['long']}")
        await page.set_viewport_size({"width": 1024, "height": 768})
        await shot("runs-1024", "/")
        await page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        await page.goto("/tasks")
        await page.click("text=Refund 45 EUR")
        await page.fill("[name='v.amount']", "0")
        await page.select_option("[name='v.reason']", label="damaged")
        await page.fill("[name='v.pickup.street']", "Veldstraat 1")
        await page.fill("[name=by]", "ann")
        await page.click("form.task-form button[type=submit]")
        await page.wait_for_selector(".field-error")
        await shot("task")
        await shot("schedules", "/schedules")
        await shot("queues", "/queues")
        await shot("workers", "/workers")
        await browser.close()
    return saved


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'shop.db'}"
        engine, ids = await fill(url)
        server = await asyncio.to_thread(start_server, url, Path(tmp))
        try:
            for path in await photograph(server.url, ids):
                print(path.relative_to(OUT.parents[1]))
        finally:
            await asyncio.to_thread(server.stop)
            await engine.__aexit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
