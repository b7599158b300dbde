"""The workflows the dashboard tests run, declared in a private registry per test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pydantic

import cairn
from cairn.authoring.step import make_step
from cairn.authoring.workflow import make_workflow

WAIT = 15.0  # seconds; runs finish in milliseconds

FORM = {
    "type": "object",
    "required": ["approved"],
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
}

# A form with every kind of input the task page renders.
RICH_FORM = {
    "type": "object",
    "required": ["approved", "amount", "reason"],
    "properties": {
        "approved": {"type": "boolean", "title": "Approved"},
        "amount": {"type": "integer", "minimum": 1, "description": "in euros"},
        "reason": {"enum": ["stock", "price", "other"]},
        "note": {"type": "string"},
        "address": {
            "type": "object",
            "required": ["city"],
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
        },
    },
}

# A form whose nested object requires three fields.
ADDRESS_FORM = {
    "type": "object",
    "required": ["name", "address"],
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "address": {
            "type": "object",
            "title": "Address",
            "required": ["street", "city", "zip"],
            "properties": {
                "street": {"type": "string", "title": "Street"},
                "city": {"type": "string", "title": "City"},
                "zip": {"type": "string", "title": "Zip"},
            },
        },
    },
}

# Text from a run that a page must show, never run.
EVIL = "<script>alert('x')</script>"
EVIL_WORKFLOW = f"t.evil{EVIL}"

# A name and an event with no place to break a line (the dashboard must break them anyway).
LONG_WORKFLOW = "t.reconciliation.monthly_ledger_consolidation_for_enterprise_customers_v2"
LONG_EVENT = "confirmation_from_the_upstream_ledger_service_of_subsidiary_emea_0001"


PAYMENT = {
    "type": "object",
    "required": ["paid"],
    "properties": {"paid": {"type": "integer", "minimum": 0}, "ref": {"type": "string"}},
}


class Payment(pydantic.BaseModel):
    """A hook payload model (the dashboard process checks it by its JSON Schema)."""

    paid: int = pydantic.Field(ge=0)
    ref: str = ""


class Flows:
    """Workflows `t.*` and what their steps saw."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.registry = cairn.Registry()
        self.fixed = False  # t.flaky's step fails until this is True
        self.tokens: list[str] = []  # hook tokens t.hook handed out
        self.release = asyncio.Event()  # t.held's step runs until this is set
        reg = self.registry

        async def add(a: int, b: int) -> int:
            return a + b

        async def flaky() -> str:
            if not self.fixed:
                raise ValueError("not fixed yet")
            return "fixed"

        async def tell(token: str) -> None:
            self.tokens.append(token)

        async def held() -> str:
            await self.release.wait()
            return "released"

        wobbles: list[str] = []

        async def wobble(text: str, *, times: int = 1) -> str:
            wobbles.append(text)
            if len(wobbles) <= times:
                raise ConnectionError(f"wobble {len(wobbles)}")
            return text

        async def decline(order: str) -> str:
            raise ValueError(
                f"payment provider rejected the charge for order {order} because the card "
                "was declined by the issuing bank with code 51 insufficient funds"
            )

        add_step = make_step(add, "add", None, None, reg)
        flaky_step = make_step(flaky, "flaky", cairn.Retry(max_attempts=1), None, reg)
        tell_step = make_step(tell, "tell", None, None, reg)
        held_step = make_step(held, "held", None, None, reg)
        retry_soon = cairn.Retry(max_attempts=3, delay="10ms", jitter=0)
        wobble_step = make_step(wobble, "wobble", retry_soon, None, reg)
        decline_step = make_step(decline, "decline", retry_soon, None, reg)
        # Fails until fixed, parked SLEEPING between its two attempts.
        retry_later = cairn.Retry(max_attempts=2, delay="400ms", jitter=0)
        shaky_step = make_step(flaky, "shaky", retry_later, None, reg)

        async def total(a: int, b: int, label: str = "sum") -> dict[str, Any]:
            cairn.set_columns(order=a, label=label)
            first = await add_step(a, b)
            second = await add_step(first, 1)
            return {"label": label, "total": first, "plus_one": second}

        async def long(steps: int) -> int:
            for i in range(steps):
                await add_step(i, 1)
            return steps

        async def waiter() -> Any:
            await add_step(1, 1)
            return await cairn.wait_for_event("go", timeout="1h")

        async def long_waiter() -> Any:
            await add_step(1, 1)
            return await cairn.wait_for_event(LONG_EVENT, timeout="1h")

        async def sleeper() -> str:
            await add_step(1, 1)
            await cairn.sleep("1h")
            return "awake"

        async def broken() -> str:
            await add_step(2, 2)
            return str(await flaky_step())

        async def holding() -> str:
            await add_step(1, 1)
            return str(await held_step())

        async def shaky() -> str:
            await add_step(3, 3)
            return str(await shaky_step())

        async def declined(order: str) -> str:
            return await decline_step(order)

        async def wobbly(text: str) -> str:
            await add_step(1, 1)
            return await wobble_step(text, times=1)

        async def inbox() -> Any:
            return await cairn.human_task(
                "review", title="Review order", data={"order": 7}, form=FORM, assignee="ann"
            )

        async def review(order: int) -> Any:
            cairn.set_columns(order=order)
            return await cairn.human_task(
                "approve",
                title=f"Approve order {order}",
                data={"order": order},
                form=RICH_FORM,
                assignee="ann",
            )

        inbox_flow = make_workflow(inbox, name="t.inbox", reg=reg)

        async def escalate() -> Any:
            return await inbox_flow()

        async def address() -> Any:
            return await cairn.human_task("address", title="Where to ship?", form=ADDRESS_FORM)

        async def evil() -> Any:
            cairn.set_columns(note=EVIL)
            payload = await cairn.wait_for_event("go", timeout="1h")
            raise ValueError(f"bad {EVIL} {payload}")

        async def hooked() -> Any:
            hook = await cairn.create_hook("callback", timeout="1h")
            await tell_step(hook.token)
            return await hook

        async def checked_hook() -> Any:
            hook = await cairn.create_hook("payment", timeout="1h", schema=PAYMENT)
            await tell_step(hook.token)
            return await hook

        async def model_hook() -> Any:
            hook = await cairn.create_hook("payment", timeout="1h", schema=Payment)
            await tell_step(hook.token)
            payment = await hook
            return {"model": type(payment).__name__, "paid": payment.paid}

        async def kid() -> Any:
            return await cairn.wait_for_event("go", timeout="1h")

        kid_flow = make_workflow(kid, name="t.kid", reg=reg)

        async def speak(n: int) -> int:
            stream = cairn.stream("tokens")
            for i in range(n):
                await stream.write(f"tok{i}")
            await self.release.wait()  # the test reads the first tokens meanwhile
            await stream.write({"done": True})
            await stream.close()
            return n

        speak_step = make_step(speak, "speak", None, None, reg)

        async def speaker(n: int) -> int:
            return int(await speak_step(n))

        async def family() -> Any:
            return await kid_flow()

        async def relay(n: int) -> Any:
            if n < 1:
                cairn.continue_as_new(n + 1)
            return await cairn.wait_for_event("go", timeout="1h")

        for name, fn in (
            ("t.speaker", speaker),
            ("t.family", family),
            ("t.relay", relay),
            ("t.total", total),
            ("t.long", long),
            ("t.waiter", waiter),
            (LONG_WORKFLOW, long_waiter),
            ("t.sleeper", sleeper),
            ("t.broken", broken),
            ("t.wobbly", wobbly),
            ("t.declined", declined),
            ("t.held", holding),
            ("t.shaky", shaky),
            ("t.escalate", escalate),
            ("t.hooked", hooked),
            ("t.review", review),
            ("t.address", address),
            (EVIL_WORKFLOW, evil),
            ("t.checked_hook", checked_hook),
            ("t.model_hook", model_hook),
        ):
            make_workflow(fn, name=name, reg=reg)

    def engine(self, **options: Any) -> cairn.Engine:
        """An engine with workers on the test's database that knows the `t.*` workflows."""
        options.setdefault("poll_interval", 0.05)
        options.setdefault("workers", 8)
        return cairn.Engine(self.url, registry=self.registry, **options)


async def until(what: str, ready: Callable[[], Awaitable[Any]]) -> Any:
    """Poll `ready` until it returns something truthy; fail after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while True:
        value = await ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {WAIT}s")
        await asyncio.sleep(0.02)  # polling interval, not synchronisation


async def status(api: httpx.AsyncClient, run_id: str, *statuses: str) -> dict[str, Any]:
    """The run (GET /runs/{id}) once its status is one of `statuses`."""

    async def reached() -> dict[str, Any] | None:
        response = await api.get(f"/runs/{run_id}")
        assert response.status_code == 200, response.text
        run: dict[str, Any] = response.json()
        return run if run["status"] in statuses else None

    found: dict[str, Any] = await until(f"run {run_id} {'/'.join(statuses)}", reached)
    return found


async def start(api: httpx.AsyncClient, workflow: str, *args: Any, **body: Any) -> str:
    """POST /runs; the new run's id."""
    response = await api.post("/runs", json={"workflow": workflow, "args": list(args), **body})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["run_id"]
    return run_id
