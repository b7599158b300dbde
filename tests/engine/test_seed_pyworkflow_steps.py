"""Coming from pyworkflow (seed 003's steps page): `@step()` and its errors, as written.

A step with an async client, the decorator's options, `RetryableError` with and without
`retry_after`, `FatalError`, results kept across a sleep, steps in `asyncio.gather`, and
an idempotency key built from the step's input. On both stores, on a virtual clock, with
only `from cairn import ...` where pyworkflow's stood.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from types import TracebackType
from typing import Any

import pytest

from cairn import FatalError, RetryableError, RunFailed, sleep, step, workflow
from cairn.clock import VirtualClock

from .kit import WAIT, Kit
from .seeds import finish


class Outbox:
    """An async client (used with `async with`) that records what it sent."""

    sent: list[dict[str, str]] = []

    async def __aenter__(self) -> Outbox:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def send(self, to: str, subject: str, body: str) -> None:
        self.sent.append({"to": to, "subject": subject, "body": body})


def retry_waits(attempts: list[dict[str, Any]]) -> list[float]:
    return [round((a["retry_at"] - a["failed_at"]).total_seconds(), 1) for a in attempts]


async def test_pyworkflow__a_step_with_an_async_client_and_its_result_kept(kit: Kit) -> None:
    Outbox.sent = []
    calls: Counter[str] = Counter()

    @step()
    async def send_notice(to: str, subject: str, body: str) -> dict[str, Any]:
        async with Outbox() as client:
            await client.send(to=to, subject=subject, body=body)
        return {"sent": True, "to": to}

    @step()
    async def lookup_member(member_id: str) -> dict[str, str]:
        calls["lookup"] += 1
        return {"email": f"{member_id}@example.org"}

    @workflow(name="pyworkflow.kept")
    async def greet_later() -> dict[str, Any]:
        member = await lookup_member("m-42")
        await sleep("1h")
        return dict(await send_notice(member["email"], "Hi again", "an hour later"))

    kit.registry.add_workflow(greet_later)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(greet_later)
        assert await finish(engine, clock, run, tick=600) == {
            "sent": True,
            "to": "m-42@example.org",
        }
        keys = [h.key for h in await engine.history(run.run_id)]
    assert calls["lookup"] == 1  # after the sleep, the kept result, not a second call
    assert Outbox.sent == [
        {"to": "m-42@example.org", "subject": "Hi again", "body": "an hour later"}
    ]
    assert keys == [f"{lookup_member.name}#1", "~sleep#1", f"{send_notice.name}#1"]


async def test_pyworkflow__the_decorators_options_all_at_once(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @step(name="load_profile_data", max_retries=5, retry_delay="exponential", timeout="30s")
    async def load_profile(profile_id: str) -> dict[str, str]:
        calls["load"] += 1
        if calls["load"] < 3:
            raise ConnectionError("profile service restarting")
        return {"id": profile_id}

    @workflow(name="pyworkflow.options")
    async def profile(profile_id: str) -> str:
        return str((await load_profile(profile_id))["id"])

    kit.registry.add_workflow(profile)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(profile, "p-7")
        assert await finish(engine, clock, run) == "p-7"
        [entry] = await engine.history(run.run_id)
        waits = retry_waits(await engine.control.attempts(run.run_id))
    assert (entry.name, entry.attempts) == ("load_profile_data", 3)
    assert waits == [pytest.approx(1, rel=0.11), pytest.approx(2, rel=0.11)]
    assert (load_profile.retry.max_attempts, load_profile.timeout) == (6, 30.0)


async def test_pyworkflow__retryable_errors_with_and_without_retry_after(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    failures = [ConnectionError("refused"), TimeoutError("slow"), None]

    @step(max_retries=3)
    async def pull_feed() -> str:
        calls["pull"] += 1
        try:
            if (failure := failures[calls["pull"] - 1]) is not None:
                raise failure
            return "feed"
        except ConnectionError:
            raise RetryableError("Connection failed") from None
        except TimeoutError:
            raise RetryableError("Request timed out", retry_after="10s") from None

    @step(max_retries=3)
    async def throttled(status: int) -> str:
        calls["throttled"] += 1
        if calls["throttled"] == 1:
            retry_after = {"Retry-After": "45"}.get("Retry-After", "60")
            raise RetryableError("Rate limited", retry_after=f"{retry_after}s")
        return f"status {status}"

    @workflow(name="pyworkflow.retryable")
    async def pull() -> list[str]:
        return [await pull_feed(), await throttled(200)]

    kit.registry.add_workflow(pull)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(pull)
        assert await finish(engine, clock, run) == ["feed", "status 200"]
        waits = retry_waits(await engine.control.attempts(run.run_id))
    # The first wait is the step's own (fixed, about a second); the others, the error's.
    assert waits[1:] == [10.0, 45.0] and 0 < waits[0] <= 2
    assert calls == {"pull": 3, "throttled": 2}


async def test_pyworkflow__a_fatal_error_fails_the_workflow_at_once(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @step()
    async def check_signup(data: dict[str, str]) -> dict[str, str]:
        calls["check"] += 1
        if "email" not in data:
            raise FatalError("Email is required")
        if "@" not in data["email"]:
            raise FatalError(f"Invalid email: {data['email']}")
        return data

    @workflow(name="pyworkflow.fatal")
    async def signup(data: dict[str, str]) -> str:
        return (await check_signup(data))["email"]

    kit.registry.add_workflow(signup)
    async with kit.engine() as engine:
        good = await engine.start(signup, {"email": "a@b.c"})
        assert await good.result(timeout=WAIT) == "a@b.c"
        for data, message in (({}, "Email is required"), ({"email": "x"}, "Invalid email: x")):
            run = await engine.start(signup, data)
            with pytest.raises(RunFailed, match=message):
                await run.result(timeout=WAIT)
            [entry] = await engine.history(run.run_id)
            assert entry.attempts == 1  # never retried
    assert calls["check"] == 3


async def test_pyworkflow__steps_in_parallel_with_gather(kit: Kit) -> None:
    @step()
    async def fetch_account(account_id: str) -> dict[str, str]:
        return {"id": account_id}

    @step()
    async def fetch_invoices(account_id: str) -> list[str]:
        return [f"{account_id}-inv-1", f"{account_id}-inv-2"]

    @step()
    async def fetch_settings(account_id: str) -> dict[str, bool]:
        return {"dark": account_id.endswith("7")}

    @workflow()  # named by its module and qualified name, as pyworkflow names it
    async def overview(account_id: str) -> dict[str, Any]:
        account, invoices, settings = await asyncio.gather(
            fetch_account(account_id), fetch_invoices(account_id), fetch_settings(account_id)
        )
        return {"account": account, "invoices": invoices, "settings": settings}

    kit.registry.add_workflow(overview)
    async with kit.engine() as engine:
        run = await engine.start(overview, "a7")
        assert await run.result(timeout=WAIT) == {
            "account": {"id": "a7"},
            "invoices": ["a7-inv-1", "a7-inv-2"],
            "settings": {"dark": True},
        }
        names = sorted(h.name for h in await engine.history(run.run_id))
    assert names == sorted([fetch_account.name, fetch_invoices.name, fetch_settings.name])


class Processor:
    """A payment processor that answers a repeated idempotency key with the first charge."""

    def __init__(self) -> None:
        self.charges: dict[str, dict[str, Any]] = {}
        self.fail_next_reply = True

    async def create(self, amount: float, idempotency_key: str) -> dict[str, Any]:
        charge = self.charges.setdefault(
            idempotency_key, {"id": f"ch-{len(self.charges) + 1}", "amount": amount}
        )
        if self.fail_next_reply:  # committed, but the reply was lost: the step is retried
            self.fail_next_reply = False
            raise ConnectionError("reply lost")
        return charge


async def test_pyworkflow__an_idempotency_key_from_the_steps_input(kit: Kit) -> None:
    processor = Processor()

    @step(max_retries=2)
    async def take_payment(order_id: str, amount: float) -> dict[str, Any]:
        return await processor.create(amount=amount, idempotency_key=f"payment-{order_id}")

    @workflow(name="pyworkflow.idempotent")
    async def pay(order_id: str) -> dict[str, Any]:
        return await take_payment(order_id, 9.5)

    kit.registry.add_workflow(pay)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(pay, "o-3")
        assert await finish(engine, clock, run) == {"id": "ch-1", "amount": 9.5}
        [entry] = await engine.history(run.run_id)
    assert entry.attempts == 2 and list(processor.charges) == ["payment-o-3"]
