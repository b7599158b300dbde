"""Coming from pyworkflow: `@step(max_retries=, retry_delay=)`, sleeps, `run_at=`, as written.

On both stores, on a virtual clock.
"""

from __future__ import annotations

import traceback
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock

from .kit import WAIT, Kit
from .seeds import drive, finish, sleeping_until, until


class TemporaryError(Exception):
    """A transient failure of the service the step calls."""


def retry_waits(attempts: list[dict[str, Any]]) -> list[float]:
    return [round((a["retry_at"] - a["failed_at"]).total_seconds(), 1) for a in attempts]


async def test_pyworkflow__max_retries_with_exponential_delay(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @cairn.step(max_retries=5, retry_delay="exponential")
    async def fetch_user(user_id: str) -> dict[str, str]:
        calls["fetch_user"] += 1
        if calls["fetch_user"] <= 3:
            raise TemporaryError("user service is down")
        return {"id": user_id, "email": f"{user_id}@example.com"}

    @kit.workflow("pyworkflow.onboarding")
    async def onboarding(user_id: str) -> str:
        user = await fetch_user(user_id)
        return user["email"]

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(onboarding, "user_123")
        assert await finish(engine, clock, run) == "user_123@example.com"
        attempts = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)
    assert entry.attempts == 4
    assert [w / base for w, base in zip(retry_waits(attempts), (1, 2, 4), strict=True)] == [
        pytest.approx(1, rel=0.11)
    ] * 3


async def test_pyworkflow__fixed_retry_delay_as_a_duration(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @cairn.step(max_retries=3, retry_delay="30s", timeout="30s")
    async def call_api() -> str:
        calls["call_api"] += 1
        if calls["call_api"] < 3:
            raise TemporaryError("rate limited")
        return "ok"

    @kit.workflow("pyworkflow.fixed")
    async def fixed() -> str:
        return str(await call_api())

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(fixed)
        assert await finish(engine, clock, run, tick=5) == "ok"
        waits = retry_waits(await engine.control.attempts(run.run_id))
    assert waits == [pytest.approx(30, rel=0.11)] * 2


async def test_pyworkflow__retries_exhausted_raise_the_steps_own_class(kit: Kit) -> None:
    @cairn.step(max_retries=1, retry_delay="fixed")
    async def flaky() -> None:
        raise TemporaryError("still down")

    @kit.workflow("pyworkflow.catch")
    async def catch() -> str:
        try:
            await flaky()
        except TemporaryError as exc:
            return f"gave up after {exc.attempts}"  # type: ignore[attr-defined]
        return "no error"

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        assert await finish(engine, clock, await engine.start(catch)) == "gave up after 2"


async def test_pyworkflow__a_caught_step_error_is_the_steps_own_error(kit: Kit) -> None:
    # As in pyworkflow: the caught exception reads like the one the step raised, and a
    # replay (after the sleep parks the run) raises the same again.
    @cairn.step(name="flaky", max_retries=2, retry_delay="fixed")
    async def flaky() -> None:
        raise TemporaryError("still down")

    @kit.workflow("pyworkflow.caught")
    async def caught() -> dict[str, Any]:
        try:
            await flaky()
        except TemporaryError as exc:
            facts = {
                "str": str(exc),
                "args": list(exc.args),
                "notes": getattr(exc, "__notes__", []),
                "shown": "".join(traceback.format_exception(exc)),
                "step_failed": isinstance(exc, cairn.StepFailed),
            }
        await cairn.sleep("1h")
        return facts

    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        facts = await finish(engine, clock, await engine.start(caught), tick=600)
    note = f"step 'flaky' failed after 3 attempt(s): {__name__}.TemporaryError"
    assert facts["str"] == "still down"
    assert facts["args"] == ["still down"]
    assert facts["notes"] == [note]
    assert facts["shown"].endswith(f": still down\n{note}\n")
    assert facts["step_failed"] is True


async def test_pyworkflow__sleeps_in_words_until_a_datetime_and_named(kit: Kit) -> None:
    clock = VirtualClock()
    calls: Counter[str] = Counter()
    wake = datetime.fromtimestamp(clock.now(), UTC) + timedelta(days=2)

    @cairn.step()
    async def send_email(to: str) -> str:
        calls[to] += 1
        return f"sent to {to}"

    @kit.workflow("pyworkflow.drip")
    async def drip(email: str) -> list[str]:
        sent = [await send_email(email)]
        await cairn.sleep("15 minutes")
        await cairn.sleep(wake)  # a datetime: until then
        await cairn.sleep("5m", name="wait_for_rate_limit")
        await cairn.sleep("nap", "1 hour 30 minutes")
        sent.append(await send_email(f"again {email}"))
        return sent

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(drip, "ada")
        parked = await until(engine, run.run_id, "SLEEPING")
        assert parked.wake_at == pytest.approx(clock.now() + 900)
        clock.advance(900)
        await drive(engine, clock, run.run_id, sleeping_until(wake.timestamp()), tick=0)
        assert await finish(engine, clock, run, tick=600) == ["sent to ada", "sent to again ada"]
        history = await engine.history(run.run_id)
    assert [(h.kind, h.key, h.name) for h in history] == [
        ("step", f"{send_email.name}#1", send_email.name),
        ("sleep", "~sleep#1", "sleep"),
        ("sleep", "~sleep#2", "sleep"),
        ("sleep", "~sleep:wait_for_rate_limit#1", "wait_for_rate_limit"),
        ("sleep", "~sleep:nap#1", "nap"),
        ("step", f"{send_email.name}#2", send_email.name),
    ]
    assert history[2].result == wake  # a sleep shows its wake time
    assert calls == {"ada": 1, "again ada": 1}


@pytest.mark.parametrize("spelling", ["run_at", "delay"])
async def test_pyworkflow__start_at_a_moment(kit: Kit, spelling: str) -> None:
    clock = VirtualClock()

    @kit.workflow("pyworkflow.later")
    async def later(n: int) -> int:
        return n * 2

    when = datetime.fromtimestamp(clock.now(), UTC) + timedelta(hours=3)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(later, 21, **{spelling: when}, run_id=f"later-{spelling}")
        record = await engine.control.record(run.run_id)
        assert (record.status, record.wake_at) == ("PENDING", pytest.approx(when.timestamp()))
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        clock.advance(3 * 3600)
        assert await finish(engine, clock, run) == 42
        history = await engine.history(run.run_id)
    assert history.args == (21,) and history.kwargs == {}  # run_at is no workflow argument


async def test_pyworkflow__naive_run_at_is_utc(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("pyworkflow.naive")
    async def naive() -> str:
        return "done"

    when = datetime.fromtimestamp(clock.now() + 60, UTC).replace(tzinfo=None)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(naive, run_at=when)
        record = await engine.control.record(run.run_id)
    assert record.wake_at == pytest.approx(clock.now() + 60)


async def test_pyworkflow__bad_starts_and_sleeps_are_named(kit: Kit) -> None:
    @kit.workflow("pyworkflow.bad")
    async def bad() -> list[str]:
        errors = []
        for attempt in (
            lambda: cairn.sleep(date(2030, 1, 1)),
            lambda: cairn.sleep(),  # type: ignore[call-overload]
            lambda: cairn.sleep(5, "x"),  # type: ignore[call-overload]
            lambda: cairn.sleep("1 month"),
            lambda: cairn.sleep_until("2030-01-01"),  # type: ignore[call-overload]
        ):
            try:
                attempt()
            except (TypeError, ValueError) as exc:  # usage errors, still of these classes
                errors.append(f"{type(exc).__name__}: {exc}")
        return errors

    now = datetime.now(UTC)
    async with kit.engine() as engine:
        errors = await (await engine.start(bad)).result(timeout=WAIT)
        with pytest.raises(ValueError, match="got both delay= and run_at=; give one"):
            await engine.start(bad, delay="1h", run_at=now)
        with pytest.raises(ValueError, match="run_at is not an ISO 8601 date or date-time: '1h'"):
            await engine.start(bad, run_at="1h")
        with pytest.raises(TypeError, match="run_at must be a datetime, a date or ISO 8601 text"):
            await engine.start(bad, run_at=3600)  # type: ignore[arg-type]
        assert len(await engine.list_runs()) == 1  # nothing stored for the bad starts
    assert errors == [
        "InvalidValue: invalid duration for cairn.sleep: datetime.date(2030, 1, 1) is a date; "
        "pass a datetime to sleep until then (cairn.sleep_until(datetime))",
        "InvalidArguments: cairn.sleep takes a duration, or a name and a duration "
        '(e.g. cairn.sleep("nap", ...)); got 0 positional argument(s)',
        "InvalidArguments: cairn.sleep(name, duration): the name must be a string, got 5",
        "InvalidValue: invalid duration for cairn.sleep: '1 month' (months and years vary in "
        'length: use days, e.g. "30 days", or sleep_until a date)',
        "InvalidArguments: cairn.sleep_until needs a datetime, got '2030-01-01'",
    ]


async def test_pyworkflow__retry_after_in_words(kit: Kit) -> None:
    clock = VirtualClock()
    calls: Counter[str] = Counter()

    @cairn.step(max_retries=2)
    async def limited() -> str:
        calls["limited"] += 1
        if calls["limited"] == 1:
            raise cairn.RetryableError("429", retry_after="2 minutes")
        return "through"

    @kit.workflow("pyworkflow.retry_after")
    async def retry_after() -> str:
        return str(await limited())

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(retry_after)
        assert await finish(engine, clock, run, tick=30) == "through"
        waits = retry_waits(await engine.control.attempts(run.run_id))
    assert waits == [120.0]


async def test_pyworkflow__class_based_step_honours_its_options(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    class FetchUserStep(cairn.Step):
        name = "fetch_user_data"
        max_retries = 5
        retry_delay = "exponential"
        timeout = "30s"
        keep_input = False

        async def execute(self, user_id: str) -> dict[str, str]:
            calls["fetch"] += 1
            if calls["fetch"] <= 4:
                raise TemporaryError("user service is down")
            return {"id": user_id}

    @kit.workflow("pyworkflow.class_step")
    async def onboarding(user_id: str) -> str:
        user = await FetchUserStep()(user_id)
        return str(user["id"])

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(onboarding, "user_123")
        assert await finish(engine, clock, run) == "user_123"
        attempts = await engine.control.attempts(run.run_id)
        [entry] = await engine.history(run.run_id)
    assert (entry.name, entry.attempts) == ("fetch_user_data", 5)
    assert entry.input == {"omitted": "declared keep_input=False"}
    assert [w / base for w, base in zip(retry_waits(attempts), (1, 2, 4, 8), strict=True)] == [
        pytest.approx(1, rel=0.11)
    ] * 4
    step = FetchUserStep()
    assert (step.retry.max_attempts, step.timeout, step.keep_input) == (6, 30.0, False)
